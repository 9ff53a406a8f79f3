package uvenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Which builds run where.
//
// uv itself is trusted, and so is installing a wheel: it unpacks files and
// runs none of them. Building is another matter: a project's build backend
// (`backend-path = ["."]` imports a module from the project), an sdist's
// setup.py and a local directory requirement all execute code that a run
// may have written, or that a request named. So:
//
//   - requirements (explicit and PEP 723) are first installed by uv as the
//     server with --no-build: wheels only, from the index and the operator's
//     find-links, into the shared uv cache. Nothing of the packages runs.
//   - when that fails because something has no wheel, and for local (file:
//     or path) and VCS requirements and for every project sync, the whole
//     environment is built again by uv under a Confiner: in the request's
//     sandbox, as the run user, with a private uv cache of its own, able to
//     write only that environment, that cache and its temp dir (plus the
//     workspace for a project sync that may rewrite uv.lock, as a run could).
//     It compiles bytecode itself. Afterwards the server takes the
//     environment over (owner, no setuid bits, read-only) without following
//     anything it contains, and never executes anything in it.
//
// Without a Confiner such builds are refused (fail closed).

// Command is one uv invocation of a build that can execute package code.
type Command struct {
	Argv []string
	Env  []string
	Dir  string
	// Writable are the only directories it may write (they are fresh and
	// the Confiner hands them to the run user): the environment being
	// built, its private uv cache, its temp dir.
	Writable []string
	// WritesWorkspace: a project sync that may rewrite the project's
	// uv.lock in the workspace; it may write the workspace as a run can.
	WritesWorkspace bool
	// Readable is what it must read besides the system: the base
	// interpreter, uv, the operator's local wheel directories, the
	// workspace (projects, local requirements), files pyexec wrote for it.
	Readable       []string
	Stdout, Stderr io.Writer
}

// Confiner runs c confined (as an unprivileged user, in a sandbox at least
// as strict as the run's) and returns its exit code. An error means it
// could not run at all.
type Confiner func(ctx context.Context, c Command) (int, error)

// errNeedsConfiner is the refusal when a build would execute code and no
// Confiner was given.
var errNeedsConfiner = errors.New("building it runs package code (a build backend, a setup.py); pyexec does that only confined, and no sandbox was given for it")

// LocalPath returns the filesystem path a requirement's URL names (file:
// URLs and plain paths), or "" for index and remote requirements.
func (r Requirement) LocalPath() string {
	u := r.URL
	if u == "" {
		return ""
	}
	if rest, ok := strings.CutPrefix(u, "file:"); ok {
		if parsed, err := url.Parse(u); err == nil && parsed.Path != "" {
			return parsed.Path
		}
		return strings.TrimPrefix(rest, "//")
	}
	if !strings.Contains(u, "://") {
		return u // a path (absolute or relative)
	}
	return ""
}

// buildsFromSource reports whether installing the requirement means
// building it: a local path or a VCS URL. (An https URL may name a wheel:
// the wheels-only pass decides.)
func (r Requirement) buildsFromSource() bool {
	if r.LocalPath() != "" {
		return true
	}
	for _, vcs := range []string{"git+", "hg+", "svn+", "bzr+"} {
		if strings.HasPrefix(r.URL, vcs) {
			return true
		}
	}
	return false
}

// needsConfinement: the plan cannot even start on the trusted pass.
func (p plan) needsConfinement() bool {
	if p.strategy == StrategyProject {
		return true
	}
	for _, s := range p.requirements {
		if r, err := ParseRequirement(s); err == nil && r.buildsFromSource() {
			return true
		}
	}
	return false
}

// needsBuild tells whether a failed wheels-only install failed for want
// of building something (then the confined pass may succeed).
func needsBuild(err error) bool {
	var uvErr *UVError
	if !errors.As(err, &uvErr) {
		return false
	}
	s := strings.ToLower(uvErr.Stderr)
	return strings.Contains(s, "no-build") || strings.Contains(s, "building from source is disabled") ||
		strings.Contains(s, "source distribution") && strings.Contains(s, "disabled")
}

// confinedEnviron is the environment of a confined build: nothing of the
// server's own (its tokens stay out), but what uv needs to reach the
// index: UV_* settings, proxies, certificates.
func (m *Manager) confinedEnviron(cache string) []string {
	env := []string{"LANG=C.UTF-8", "UV_CACHE_DIR=" + cache, "UV_PYTHON_DOWNLOADS=never",
		"UV_LINK_MODE=copy", "NO_COLOR=1", "UV_NO_PROGRESS=1"}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range m.cfg.Environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH":
			path = v
		case k == "UV_CACHE_DIR", k == "UV_PROJECT_ENVIRONMENT", k == "UV_LINK_MODE", k == "UV_PYTHON_DOWNLOADS":
		case strings.HasPrefix(k, "UV_"),
			k == "SSL_CERT_FILE", k == "SSL_CERT_DIR", k == "REQUESTS_CA_BUNDLE",
			strings.EqualFold(k, "HTTP_PROXY"), strings.EqualFold(k, "HTTPS_PROXY"),
			strings.EqualFold(k, "ALL_PROXY"), strings.EqualFold(k, "NO_PROXY"):
			env = append(env, kv)
		}
	}
	return append(env, "PATH="+path)
}

// confinedReadable is what every confined uv command reads besides the
// system: uv, the base interpreter's prefix, local find-links directories
// and the server's uv config file.
func (m *Manager) confinedReadable(p plan) []string {
	out := []string{m.uv.path}
	prefix := func(bin string) {
		if d := filepath.Dir(filepath.Dir(bin)); d != "/" && d != "/usr" {
			out = append(out, d)
		}
	}
	prefix(p.python)
	if real, err := filepath.EvalSymlinks(p.python); err == nil {
		prefix(real)
	}
	for _, f := range p.index.FindLinks {
		if !strings.Contains(f, "://") {
			out = append(out, f)
		} else if path, ok := strings.CutPrefix(f, "file://"); ok {
			out = append(out, path)
		}
	}
	for _, kv := range m.cfg.Environ {
		if v, ok := strings.CutPrefix(kv, "UV_CONFIG_FILE="); ok && v != "" {
			out = append(out, v)
		}
	}
	return out
}

// adopt takes over an environment a confined build made, once nothing of
// that build runs any more: everything becomes the server's (lchown: no
// symlink is followed), loses setuid/setgid/sticky bits and write access
// for anyone but the owner, and is then made read-only (makeReadOnly). A
// file that has other hard links (to something outside, which the build
// could not otherwise have written) is refused.
func adopt(dir string) error {
	uid, gid := os.Geteuid(), os.Getegid()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		nlink, ok := linkCount(fi)
		if !ok {
			return fmt.Errorf("%s: no stat", p)
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return os.Lchown(p, uid, gid)
		case d.IsDir(), d.Type().IsRegular():
		default:
			// A FIFO or socket has no place in an environment.
			return os.Remove(p)
		}
		if d.Type().IsRegular() && nlink > 1 {
			return fmt.Errorf("the build left %s hard-linked to another file; refused", p)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
		return os.Chmod(p, fi.Mode().Perm()&^0o022)
	})
	if err != nil {
		return fmt.Errorf("take over the environment: %w", err)
	}
	if err := makeReadOnly(dir); err != nil {
		return fmt.Errorf("take over the environment: %w", err)
	}
	return nil
}

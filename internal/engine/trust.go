package engine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/workspace"

	"github.com/pyexec/pyexec/internal/pathwalk"
)

// Trust: which interpreters the server may execute itself.
//
// Probing an interpreter means executing it. The server does that, as
// itself, only for trusted interpreters: those it discovered or was
// configured with (PATH, pyenv's versions, /usr/bin, /usr/local/bin, uv's),
// and only when neither the path nor any symlink met resolving it lies in a
// tree runs can write (the workspace, the state dir). Everything else a
// request names (an explicit `python`, the cwd's .venv) may have been
// written by a run, and is never executed by the server:
//
//   - when it resolves to a trusted binary (a venv's bin/python is a symlink
//     to its base), its version is that binary's, and the binary is its
//     base: nothing is executed;
//   - when it belongs to a venv whose pyvenv.cfg (read race-free, as the run
//     user) names a trusted interpreter as its home, likewise;
//   - otherwise it is probed confined: through the launcher, under the
//     request's own sandbox, as the run user (confined.go).
//
// The run then executes the path confined, as every run. What is cached
// about such a path is a version string, keyed by the file's identity; no
// cached fact ever leads the server to execute the path, so swapping the
// file later gains nothing. Dependency environments are built only on a
// trusted base (uv executes it unconfined).

// interpKind is how far an Interpreter's Path can be trusted.
type interpKind int

const (
	kindRequest interpKind = iota // named by a request or found in the workspace: executed only confined
	kindTrusted                   // discovered or configured, outside every run-writable tree
	kindEnv                       // a uv environment pyexec built (its bin/python)
)

type fileID struct{ dev, ino uint64 }

// trustSet holds what trusted probes found, by file identity: of the
// interpreter binary itself, and of the path probed (a pyenv shim resolves
// to the binary it runs).
type trustSet struct {
	byID map[fileID]Interpreter
}

func (t *trustSet) add(probed string, it Interpreter) {
	if t.byID == nil {
		t.byID = map[fileID]Interpreter{}
	}
	for _, p := range []string{probed, it.Path} {
		if id, ok := idOf(p); ok {
			if _, had := t.byID[id]; !had || p == it.Path {
				t.byID[id] = it
			}
		}
	}
}

func (in *interpreters) trustedByID(path string) (Interpreter, bool) {
	id, ok := idOf(path)
	if !ok {
		return Interpreter{}, false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	it, ok := in.trusted.byID[id]
	return it, ok
}

// outsideWritable checks that resolving path meets nothing a run or another
// user could change: no tree runs can write (the workspace, the state dir)
// holds the path, a symlink on the way, or what it finally names; and each
// of those, with every directory above it, belongs to root or the server's
// user and is writable by no one else (the sshd StrictModes rule).
func (in *interpreters) outsideWritable(path string) error {
	visited, err := resolveChain(path)
	if err != nil {
		return err
	}
	for _, v := range visited {
		for _, w := range in.writable {
			if workspace.Within(w, v) {
				return fmt.Errorf("%s lies in %s, which runs can write: the server executes nothing from there itself", path, w)
			}
		}
		if err := ownedSecurely(v); err != nil {
			return fmt.Errorf("%s: %w: the server executes nothing from there itself", path, err)
		}
	}
	return nil
}

// resolveChain resolves path like the kernel, returning the clean path,
// the location of every symlink met, and the final path.
func resolveChain(path string) ([]string, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: not an absolute path", path)
	}
	real, links, err := pathwalk.Resolve(path)
	if err != nil {
		return nil, err
	}
	visited := []string{filepath.Clean(path)}
	for _, l := range links {
		visited = append(visited, l.Path)
	}
	return append(visited, real), nil
}

// trustedAt returns the trusted interpreter path names, if it is one: its
// resolution meets no run-writable tree and lands on a binary (or shim) a
// trusted probe found.
func (in *interpreters) trustedAt(path string) bool {
	if in.outsideWritable(path) != nil {
		return false
	}
	_, ok := in.trustedByID(path)
	return ok
}

// requestInterpreter is the interpreter at path (an explicit `python`, or
// the cwd's .venv/bin/python), learned without the server executing it
// unless it is trusted (see the top of this file). The trusted set starts
// with the default interpreter; discovery (all installed interpreters,
// probed once) is only needed when path is none of those known so far.
func (e *Engine) requestInterpreter(ctx context.Context, req *Request, cwd, path string, rights workspace.Rights) (Interpreter, error) {
	if _, err := os.Stat(path); err != nil {
		return Interpreter{}, err
	}
	_, _ = e.defaultInterpreter(ctx)
	for pass := 0; pass < 2; pass++ {
		if pass == 1 {
			e.interps.complete(ctx)
		}
		if e.interps.trustedAt(path) {
			return e.interps.probe(ctx, path)
		}
		if base, ok := e.trustedBase(path, rights); ok {
			return Interpreter{Path: path, Version: base.Version, kind: kindRequest, base: base.base}, nil
		}
	}
	version, err := e.confinedVersion(ctx, req, cwd, path)
	if err != nil {
		return Interpreter{}, err
	}
	return Interpreter{Path: path, Version: version, kind: kindRequest}, nil
}

// trustedBase finds the trusted interpreter a (possibly run-written)
// interpreter path runs on: the binary it resolves to, or the home its
// venv's pyvenv.cfg names. Whatever the files say, the answer is one of the
// trusted interpreters, or none.
func (e *Engine) trustedBase(path string, rights workspace.Rights) (Interpreter, bool) {
	if real, err := filepath.EvalSymlinks(path); err == nil && e.interps.trustedAt(real) {
		if it, ok := e.interps.trustedByID(real); ok {
			return it, true
		}
	}
	home, version := e.readPyvenvCfg(filepath.Join(filepath.Dir(filepath.Dir(path)), "pyvenv.cfg"), rights)
	if home == "" || !filepath.IsAbs(home) {
		return Interpreter{}, false
	}
	names := []string{"python3", "python"}
	if mm := majorMinor(version); mm != "" {
		names = append([]string{"python" + mm}, names...)
	}
	for _, n := range names {
		cand := filepath.Join(home, n)
		if !e.interps.trustedAt(cand) {
			continue
		}
		it, ok := e.interps.trustedByID(cand)
		if ok && (version == "" || majorMinor(it.Version) == majorMinor(version)) {
			return it, true
		}
	}
	return Interpreter{}, false
}

var pyvenvVersion = regexp.MustCompile(`^\d+\.\d+(\.\d+)?`)

func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "." + parts[1]
}

// readPyvenvCfg reads a venv's home and version race-free, with the run
// user's rights ("" when unreadable). Inside the workspace the workspace's
// rules apply; elsewhere the file is opened from / with no symlink
// allowed after resolving it, and without the workspace's idmapping.
func (e *Engine) readPyvenvCfg(cfg string, rights workspace.Rights) (home, version string) {
	real, err := filepath.EvalSymlinks(cfg)
	if err != nil {
		return "", ""
	}
	var data []byte
	if e.ws.Contains(real) {
		data, err = e.ws.ReadFile(real, rights, 64<<10)
	} else {
		rights.Idmapped = false
		var f *os.File
		if f, err = workspace.OpenBeneath("/", strings.TrimPrefix(real, "/"), rights); err == nil {
			defer f.Close()
			data, err = io.ReadAll(io.LimitReader(f, 64<<10))
		}
	}
	if err != nil {
		return "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k, v = strings.TrimSpace(k), strings.TrimSpace(v); k {
		case "home":
			home = filepath.Clean(v)
		case "version", "version_info":
			if m := pyvenvVersion.FindString(v); m != "" {
				version = m
			}
		}
	}
	return home, version
}

var probedVersion = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

const versionScript = "import sys; print('%d.%d.%d' % sys.version_info[:3])"

// confinedVersion asks the untrusted interpreter at path for its version,
// confined under the request's sandbox as the run user. The answer is
// remembered by path and file identity; it is only ever used as a version
// string.
func (e *Engine) confinedVersion(ctx context.Context, req *Request, cwd, path string) (string, error) {
	key := ""
	if fi, err := os.Stat(path); err == nil {
		key = statKey(path, fi)
	}
	e.interps.mu.Lock()
	ent, ok := e.interps.confined[key]
	e.interps.mu.Unlock()
	if ok && key != "" {
		return ent.interp.Version, nil
	}
	settings, err := e.sandboxSettings(req)
	if err != nil {
		return "", err
	}
	it := Interpreter{Path: path, kind: kindRequest}
	var out, errOut bytes.Buffer
	code, err := e.runConfined(ctx, settings, confinedCmd{
		argv: []string{path, "-S", "-c", versionScript}, dir: cwd,
		env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "PYTHONNOUSERSITE=1"},
		// The workspace read-only: the probe may read what the run could,
		// and write only its own temp dir.
		readOnly: e.interpreterDirs(it), stdout: &out, stderr: &errOut, timeout: 10 * time.Second,
	})
	if err != nil {
		return "", fmt.Errorf("probe (confined, as the run user): %w", err)
	}
	version := strings.TrimSpace(out.String())
	if code != 0 || !probedVersion.MatchString(version) {
		msg := strings.TrimSpace(errOut.String())
		if len(msg) > 500 {
			msg = msg[len(msg)-500:]
		}
		return "", fmt.Errorf("probe (confined, as the run user) exited %d without a version: %s", code, msg)
	}
	if key != "" {
		e.interps.mu.Lock()
		if e.interps.confined == nil || len(e.interps.confined) >= 256 {
			e.interps.confined = map[string]probeEntry{}
		}
		e.interps.confined[key] = probeEntry{interp: Interpreter{Version: version}}
		e.interps.mu.Unlock()
	}
	return version, nil
}

// interpreterDirs are the trees a run of it must read: for a trusted
// interpreter its prefix (bin/..), the real binary's prefix and its venv
// home's; for an environment pyexec built, the environment; for any, its
// trusted base's prefixes. A path a request named gets its own prefix only
// when that lies outside the workspace (which the run has anyway), outside
// and above no hidden tree (the state dir, the server's home, /tmp), and the
// run-as user may read it by its mode bits: whatever such a path's files
// say, no grant reaches what the run could not read anyway.
func (e *Engine) interpreterDirs(it Interpreter) []string {
	var dirs []string
	add := func(bin string) {
		if bin == "" {
			return
		}
		d := filepath.Dir(filepath.Dir(bin))
		if d != "/" && d != "/usr" {
			dirs = append(dirs, d)
		}
	}
	addTrusted := func(bin string) {
		add(bin)
		if real, err := filepath.EvalSymlinks(bin); err == nil {
			add(real)
		}
	}
	switch it.kind {
	case kindTrusted:
		addTrusted(it.Path)
		if f, err := os.Open(filepath.Join(filepath.Dir(filepath.Dir(it.Path)), "pyvenv.cfg")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				k, v, ok := strings.Cut(sc.Text(), "=")
				if ok && strings.TrimSpace(k) == "home" {
					add(filepath.Join(strings.TrimSpace(v), "python"))
				}
			}
			f.Close()
		}
	case kindEnv:
		add(it.Path)
	case kindRequest:
		if d := filepath.Dir(filepath.Dir(it.Path)); !e.ws.Contains(filepath.Clean(it.Path)) && e.requestGrantable(d) {
			dirs = append(dirs, d)
		}
	}
	if it.base != "" && it.base != it.Path {
		addTrusted(it.base)
	}
	var out []string
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// requestGrantable says whether dir, the prefix of an interpreter a request
// named outside the workspace, may be granted to its run read-only.
func (e *Engine) requestGrantable(dir string) bool {
	if dir == "/" || dir == "/usr" || !filepath.IsAbs(dir) {
		return false
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	for _, h := range append(hiddenTrees(e.cfg.StateDir), "/tmp", "/etc") {
		if rh, err := filepath.EvalSymlinks(h); err == nil {
			h = rh
		}
		if workspace.Within(h, real) || workspace.Within(real, h) {
			return false
		}
	}
	if os.Geteuid() != 0 {
		return true // runs execute as the server's uid: the kernel decides
	}
	mode := e.cfg.RunAs
	if mode == "" || strings.EqualFold(mode, sandbox.RunAsAuto) {
		mode = sandbox.DefaultRunAsUser
	}
	if mode == sandbox.RunAsNone || mode == "root" {
		return true
	}
	cred, err := sandbox.LookupCredential(mode)
	if err != nil {
		return false
	}
	return sandbox.CheckAccess(cred, real, sandbox.AccessRead|sandbox.AccessExec) == nil
}

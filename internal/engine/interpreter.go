package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/uvenv"
	"github.com/pyexec/pyexec/internal/workspace"
)

// Execution strategies reported in Result.ExecutionStrategy.
const (
	StrategySystem = "system-python"
	StrategyVenv   = "venv"
)

// Interpreter is a Python that can be executed directly. Path is never a
// pyenv shim: shims are shell scripts that cost 100+ ms per start, so every
// candidate is resolved once to the binary that sys.executable names.
type Interpreter struct {
	Path    string `json:"path" jsonschema:"Interpreter binary that is executed (never a shim)."`
	Version string `json:"version" jsonschema:"Full version, like 3.11.7."`
	Source  string `json:"source,omitempty" jsonschema:"Where it was found: default, PATH, pyenv, uv, system."`

	// kind says how far Path can be trusted (trust.go).
	kind interpKind
	// base is a trusted interpreter Path runs on: Path itself (or the
	// interpreter a trusted venv was made from) when trusted, the one a
	// workspace venv links to, an environment's base; "" when none is
	// known. uv builds environments on it, unconfined, so it is never a
	// file a run could have written.
	base string
}

// interpreters finds and remembers Pythons. Probing one costs a Python start,
// so results are cached by path and file identity, in memory and in the
// state dir (interpcache.go); the list of all of them is discovered once and
// refreshed in the background (discover.go).
type interpreters struct {
	// writable are the trees runs can write (the workspace, the state
	// dir): nothing in them is ever trusted, whatever finds it.
	writable []string
	cache    *interpCache
	cwd      string // where pyenv looks for .python-version (the server's cwd)

	mu       sync.Mutex
	probes   map[string]probeEntry
	trusted  trustSet              // what trusted probes found (trust.go)
	confined map[string]probeEntry // versions learned by confined probes, by path and identity

	disc discovery // the list of all interpreters (discover.go)
}

type probeEntry struct {
	modTime time.Time
	size    int64
	interp  Interpreter
}

const probeScript = "import sys; print(sys.executable); print('%d.%d.%d' % sys.version_info[:3])"

// probe learns the real executable behind path and its version: from the
// cache while the file is unchanged, by following a pyenv shim's rules
// without executing it (pyenvshim.go), or by running path once (without
// site, for speed). It runs it as the server, so it refuses a path whose
// resolution meets a tree runs can write (trust.go); what it finds is
// remembered as trusted.
func (in *interpreters) probe(ctx context.Context, path string) (Interpreter, error) {
	if err := in.outsideWritable(path); err != nil {
		return Interpreter{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Interpreter{}, fmt.Errorf("interpreter %s: %w", path, err)
	}
	in.mu.Lock()
	if in.probes == nil {
		in.probes = make(map[string]probeEntry)
	}
	if p, ok := in.probes[path]; ok && p.modTime.Equal(fi.ModTime()) && p.size == fi.Size() {
		in.mu.Unlock()
		return p.interp, nil
	}
	in.mu.Unlock()

	var interp Interpreter
	if root, ok := pyenvShim(path); ok {
		if target := pyenvTarget(path, root, os.Getenv, in.cwd, in.runWritable); target != "" {
			if interp, err = in.probe(ctx, target); err != nil {
				return Interpreter{}, fmt.Errorf("probe interpreter %s (pyenv shim for %s): %w", path, target, err)
			}
		}
	}
	key := statKey(path, fi)
	if interp.Path == "" {
		if cached, ok := in.cache.probe(key); ok {
			interp = cached
		}
	}
	if interp.Path == "" {
		if interp, err = runProbe(ctx, path, in.probeDir()); err != nil {
			return Interpreter{}, err
		}
		if sameBinary(path, interp.Path) {
			// A real binary (not a wrapper whose target can change without
			// the wrapper changing): worth remembering across restarts.
			in.cache.remember(key, interp)
		}
	}
	interp.kind, interp.Source = kindTrusted, ""
	if err := in.outsideWritable(interp.Path); err != nil {
		return Interpreter{}, fmt.Errorf("probe interpreter %s: %w", path, err)
	}
	interp.base = interp.Path
	if isVenv(interp.Path) {
		// Environments are built on the base, not on a venv: a venv's
		// bin/python is a symlink to its base.
		if real, err := filepath.EvalSymlinks(interp.Path); err == nil && !isVenv(real) {
			interp.base = real
		}
	}
	in.mu.Lock()
	in.probes[path] = probeEntry{modTime: fi.ModTime(), size: fi.Size(), interp: interp}
	in.trusted.add(path, interp)
	in.mu.Unlock()
	return interp, nil
}

// runWritable reports whether p lies in a tree runs can write.
func (in *interpreters) runWritable(p string) bool {
	for _, w := range in.writable {
		if workspace.Within(w, p) {
			return true
		}
	}
	return false
}

// probeDir is where a probe runs: the server's cwd, unless runs can write
// there (a wrapper like a pyenv shim reads files from its cwd: a
// .python-version a run wrote would choose what the server executes).
func (in *interpreters) probeDir() string {
	if in.cwd == "" || in.runWritable(in.cwd) {
		return "/"
	}
	return in.cwd
}

// sameBinary reports whether path resolves to the binary exe names (path
// is that binary or a symlink to it, not a wrapper script).
func sameBinary(path, exe string) bool {
	a, err1 := filepath.EvalSymlinks(path)
	b, err2 := filepath.EvalSymlinks(exe)
	return err1 == nil && err2 == nil && a == b
}

// runProbe executes the interpreter at path (as the server: probe checked
// it) and reads what it says about itself.
func runProbe(ctx context.Context, path, dir string) (Interpreter, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-S", "-c", probeScript)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONNOUSERSITE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Interpreter{}, fmt.Errorf("probe interpreter %s: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || lines[0] == "" || !filepath.IsAbs(strings.TrimSpace(lines[0])) {
		return Interpreter{}, fmt.Errorf("probe interpreter %s: unexpected output %q", path, out)
	}
	return Interpreter{Path: strings.TrimSpace(lines[0]), Version: strings.TrimSpace(lines[1])}, nil
}

// resolve turns a path or a command name into an executable interpreter.
func (in *interpreters) resolve(ctx context.Context, nameOrPath string) (Interpreter, error) {
	path := nameOrPath
	if !strings.ContainsRune(path, filepath.Separator) {
		p, err := exec.LookPath(path)
		if err != nil {
			return Interpreter{}, fmt.Errorf("find interpreter %q on PATH: %w", nameOrPath, err)
		}
		path = p
	}
	return in.probe(ctx, path)
}

// matchVersion picks the newest interpreter whose version equals want or
// starts with want + ".".
func matchVersion(all []Interpreter, want string) (Interpreter, bool) {
	for _, it := range all { // newest first
		if it.Version == want || strings.HasPrefix(it.Version, want+".") {
			return it, true
		}
	}
	return Interpreter{}, false
}

func validVersion(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) < 1 || len(parts) > 3 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil || p == "" {
			return false
		}
	}
	return true
}

// compareVersions orders dotted numeric versions.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// chooseInterpreter applies the precedence: explicit path > python_version >
// the cwd's .venv > the server default. An explicit path or a workspace
// .venv is a file a run may have written: requestInterpreter learns what it
// needs without executing it as the server (trust.go).
func (e *Engine) chooseInterpreter(ctx context.Context, req *Request, cwd string, rights workspace.Rights) (Interpreter, string, error) {
	switch {
	case req.Python != "":
		if !filepath.IsAbs(req.Python) {
			return Interpreter{}, "", badRequest("python", "%q must be an absolute path to an interpreter", req.Python)
		}
		if strings.ContainsRune(req.Python, 0) {
			return Interpreter{}, "", badRequest("python", "contains a NUL byte")
		}
		it, err := e.requestInterpreter(ctx, req, cwd, filepath.Clean(req.Python), rights)
		if err != nil {
			return Interpreter{}, "", badRequest("python", "%q is not a working Python interpreter: %v", req.Python, err)
		}
		strategy := StrategySystem
		if isVenv(it.Path) {
			strategy = StrategyVenv
		}
		return it, strategy, nil
	case req.PythonVersion != "":
		if !validVersion(req.PythonVersion) {
			return Interpreter{}, "", badRequest("python_version", "%q is not a version like 3.12 or 3.12.1", req.PythonVersion)
		}
		all := e.interps.All(ctx)
		it, ok := matchVersion(all, req.PythonVersion)
		if !ok {
			// Perhaps one only uv knows, and its answer is still coming.
			all = e.interps.complete(ctx)
			it, ok = matchVersion(all, req.PythonVersion)
		}
		if !ok {
			var have []string
			for _, a := range all {
				have = append(have, a.Version)
			}
			return Interpreter{}, "", badRequest("python_version", "Python %s is not installed on this server (available: %s); pyexec never downloads interpreters", req.PythonVersion, strings.Join(have, ", "))
		}
		return it, StrategySystem, nil
	}
	venvPython := uvenv.VenvPython(filepath.Join(cwd, ".venv"))
	if _, err := os.Stat(venvPython); err == nil {
		it, err := e.requestInterpreter(ctx, req, cwd, venvPython, rights)
		if err != nil {
			return Interpreter{}, "", badRequest("cwd", "its .venv cannot be used: %s: %v", venvPython, err)
		}
		return it, StrategyVenv, nil
	}
	it, err := e.defaultInterpreter(ctx)
	return it, StrategySystem, err
}

func (e *Engine) defaultInterpreter(ctx context.Context) (Interpreter, error) {
	name := e.cfg.Python
	if name == "" {
		name = defaultPythonName
	}
	it, err := e.interps.resolve(ctx, name)
	if err != nil {
		return Interpreter{}, fmt.Errorf("default interpreter: %w", err)
	}
	it.Source = "default"
	return it, nil
}

// isVenv reports whether the interpreter at path belongs to a virtual
// environment (a pyvenv.cfg one level above its bin directory).
func isVenv(path string) bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(path)), "pyvenv.cfg"))
	return err == nil
}

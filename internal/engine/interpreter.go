package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/pyexec/pyexec/internal/uvenv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
// so results are cached by path and file identity.
type interpreters struct {
	// writable are the trees runs can write (the workspace, the state
	// dir): nothing in them is ever trusted, whatever finds it.
	writable []string

	mu       sync.Mutex
	probes   map[string]probeEntry
	trusted  trustSet              // what trusted probes found (trust.go)
	confined map[string]probeEntry // versions learned by confined probes, by path and identity

	listOnce sync.Once
	list     []Interpreter
}

type probeEntry struct {
	modTime time.Time
	size    int64
	interp  Interpreter
}

const probeScript = "import sys; print(sys.executable); print('%d.%d.%d' % sys.version_info[:3])"

// probe runs path once (without site, for speed) to learn the real
// executable behind it and its version. It runs it as the server, so it
// refuses a path whose resolution meets a tree runs can write (trust.go);
// what it finds is remembered as trusted.
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

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-S", "-c", probeScript)
	cmd.Env = append(os.Environ(), "PYTHONNOUSERSITE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Interpreter{}, fmt.Errorf("probe interpreter %s: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || lines[0] == "" {
		return Interpreter{}, fmt.Errorf("probe interpreter %s: unexpected output %q", path, out)
	}
	interp := Interpreter{Path: strings.TrimSpace(lines[0]), Version: strings.TrimSpace(lines[1]), kind: kindTrusted}
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

// All lists every interpreter this machine offers, newest first, without
// duplicates: python3 and python3.X on PATH, pyenv's versions, the usual
// system locations and, when uv is installed, the ones uv knows. Nothing is
// ever downloaded.
func (in *interpreters) All(ctx context.Context) []Interpreter {
	in.listOnce.Do(func() { in.list = in.discover(ctx) })
	return in.list
}

func (in *interpreters) discover(ctx context.Context) []Interpreter {
	type candidate struct{ path, source string }
	var cands []candidate
	for _, name := range pythonNames() {
		if p, err := exec.LookPath(name); err == nil {
			cands = append(cands, candidate{p, "PATH"})
		}
	}
	pyenvRoot := os.Getenv("PYENV_ROOT")
	if pyenvRoot == "" {
		if home, err := os.UserHomeDir(); err == nil {
			pyenvRoot = filepath.Join(home, ".pyenv")
		}
	}
	if pyenvRoot != "" {
		matches, _ := filepath.Glob(filepath.Join(pyenvRoot, "versions", "*", "bin", "python3"))
		for _, m := range matches {
			cands = append(cands, candidate{m, "pyenv"})
		}
	}
	for _, dir := range []string{"/usr/bin", "/usr/local/bin"} {
		matches, _ := filepath.Glob(filepath.Join(dir, "python3.*"))
		for _, m := range matches {
			if isVersionedPython(filepath.Base(m)) {
				cands = append(cands, candidate{m, "system"})
			}
		}
	}
	for _, p := range uvInterpreters(ctx) {
		cands = append(cands, candidate{p, "uv"})
	}

	results := make([]Interpreter, len(cands))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if it, err := in.probe(ctx, c.path); err == nil {
				it.Source = c.source
				results[i] = it
			}
		}()
	}
	wg.Wait()

	seen := make(map[string]bool)
	var out []Interpreter
	for _, it := range results {
		if it.Path == "" {
			continue
		}
		key := it.Path
		if real, err := filepath.EvalSymlinks(it.Path); err == nil {
			key = real
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, it)
	}
	slices.SortStableFunc(out, func(a, b Interpreter) int { return compareVersions(b.Version, a.Version) })
	return out
}

func pythonNames() []string {
	names := []string{defaultPythonName}
	for minor := 20; minor >= 6; minor-- {
		names = append(names, "python3."+strconv.Itoa(minor))
	}
	return names
}

func isVersionedPython(base string) bool {
	rest, ok := strings.CutPrefix(base, "python3.")
	if !ok || rest == "" {
		return false
	}
	_, err := strconv.Atoi(rest)
	return err == nil
}

// uvInterpreters asks uv for the interpreters it has found (installed only).
func uvInterpreters(ctx context.Context) []string {
	uv, err := exec.LookPath("uv")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, uv, "python", "list", "--only-installed", "--output-format", "json")
	// From /, and without an active environment: uv also reports the
	// environment of the current directory, which could be a workspace's.
	cmd.Dir = "/"
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "VIRTUAL_ENV", "CONDA_PREFIX", "UV_PYTHON", "UV_PROJECT_ENVIRONMENT":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "UV_PYTHON_DOWNLOADS=never", "UV_OFFLINE=1")
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	var entries []struct {
		Path *string `json:"path"`
	}
	if json.Unmarshal(out, &entries) != nil {
		return nil
	}
	var paths []string
	for _, e := range entries {
		if e.Path != nil && *e.Path != "" {
			paths = append(paths, *e.Path)
		}
	}
	return paths
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

package engine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pyexec/pyexec/internal/workspace"
)

// runEnv builds the environment of one run: a minimal, safe base (or the
// server's environment with --inherit-env), then the env_file, then env_vars,
// which win.
type runEnv struct {
	order []string
	vars  map[string]string
}

func (r *runEnv) set(k, v string) {
	if _, ok := r.vars[k]; !ok {
		r.order = append(r.order, k)
	}
	r.vars[k] = v
}

func (r *runEnv) get(k string) (string, bool) {
	v, ok := r.vars[k]
	return v, ok
}

func (r *runEnv) list() []string {
	out := make([]string, 0, len(r.order))
	for _, k := range r.order {
		out = append(out, k+"="+r.vars[k])
	}
	return out
}

// baseEnv is what every run starts from. The minimal base carries only what
// Python needs to behave predictably; the server's secrets stay out.
func (e *Engine) baseEnv(interp Interpreter, strategy, tmpDir string) *runEnv {
	env := &runEnv{vars: map[string]string{}}
	if e.cfg.InheritEnv {
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env.set(k, v)
			}
		}
	} else {
		path := os.Getenv("PATH")
		if path == "" {
			path = "/usr/local/bin:/usr/bin:/bin"
		}
		env.set("PATH", path)
		home, err := os.UserHomeDir()
		if err != nil {
			home = "/"
		}
		env.set("HOME", home)
		env.set("LANG", "C.UTF-8")
	}
	binDir := filepath.Dir(interp.Path)
	if p, _ := env.get("PATH"); !slices.Contains(filepath.SplitList(p), binDir) {
		// `python` and console scripts in a subprocess find the same
		// interpreter (and venv) the run uses.
		env.set("PATH", binDir+string(os.PathListSeparator)+p)
	}
	if strategy != StrategySystem {
		env.set("VIRTUAL_ENV", filepath.Dir(binDir))
	}
	env.set("TMPDIR", tmpDir)
	env.set("PYEXEC_RT_DIR", pyrtDir(e.cfg.StateDir)) // the driver loads the run's hooks from there (pyrt.go)
	env.set("PYTHONUNBUFFERED", "1")
	env.set("PYTHONIOENCODING", "utf-8")
	return env
}

// applyRequestEnv layers the env_file and env_vars of req on top of env.
//
// The env_file is read race-free with the run user's rights: a file the
// run could not read, or one swapped for a symlink after the path check,
// is refused (workspace.Root.Open).
func (e *Engine) applyRequestEnv(env *runEnv, req *Request, cwd string, rights workspace.Rights) error {
	if req.EnvFile != "" {
		path, err := e.insideWorkspace("env_file", req.EnvFile, cwd)
		if err != nil {
			return err
		}
		data, err := e.readWorkspaceFile("env_file", req.EnvFile, path, rights, maxEnvFileBytes)
		if err != nil {
			return err
		}
		pairs, err := parseDotenv(string(data), env.get)
		if err != nil {
			return badRequest("env_file", "%q: %v", req.EnvFile, err)
		}
		for _, p := range pairs {
			env.set(p.key, p.value)
		}
	}
	keys := make([]string, 0, len(req.EnvVars))
	for k := range req.EnvVars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := req.EnvVars[k]
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return badRequest("env_vars", "invalid variable name %q (it must be non-empty, without '=' or NUL)", k)
		}
		if strings.ContainsRune(v, 0) {
			return badRequest("env_vars", "value of %s contains a NUL byte", k)
		}
		env.set(k, v)
	}
	return nil
}

// checkEnvSize keeps the kernel's argument+environment limit from turning
// into an obscure exec failure.
func checkEnvSize(env []string, args []string) error {
	total := 0
	for _, s := range env {
		total += len(s) + 1
	}
	for _, s := range args {
		total += len(s) + 1
	}
	const limit = 1 << 20
	if total > limit {
		return badRequest("env_vars", "arguments and environment take %d bytes; the limit is %d", total, limit)
	}
	return nil
}

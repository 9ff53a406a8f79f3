package engine

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pyexec/pyexec/internal/testutil/pyinterp"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// depsEngine is an engine whose environments come only from the test wheels
// (no index, offline): hermetic dependency tests with real uv.
func depsEngine(t *testing.T, mutate ...func(*Config)) (*Engine, string, string) {
	t.Helper()
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	dir := wheels.Dir(t)
	python := pyinterp.Real(t)
	e, ws := newTestEngine(t, append([]func(*Config){func(c *Config) {
		c.Python = python
		c.Deps.Index = uvenv.IndexSettings{NoIndex: true, FindLinks: []string{dir}, Offline: true}
	}}, mutate...)...)
	return e, ws, dir
}

const pep723Beta = `# /// script
# requires-python = ">=3.8"
# dependencies = ["pyexec-beta"]
# ///
import pyexec_alpha, pyexec_beta
print(pyexec_alpha.__version__)
`

func TestRunWithDependencies(t *testing.T) {
	e, ws, _ := depsEngine(t)
	writeFile(t, filepath.Join(ws, "scripts", "tool.py"), pep723Beta)
	tests := []struct {
		name     string
		req      Request
		stdout   string
		resolved []string
	}{
		{name: "explicit dependencies", req: Request{Code: "import pyexec_alpha; print(pyexec_alpha.__version__)", Dependencies: []string{"pyexec-alpha==1.0"}},
			stdout: "1.0\n", resolved: []string{"pyexec-alpha==1.0"}},
		{name: "transitive", req: Request{Code: "import pyexec_alpha, pyexec_beta; print(pyexec_alpha.__version__)", Dependencies: []string{"pyexec-beta"}},
			stdout: "2.0\n", resolved: []string{"pyexec-alpha==2.0", "pyexec-beta==1.0"}},
		{name: "PEP 723 in inline code", req: Request{Code: pep723Beta},
			stdout: "2.0\n", resolved: []string{"pyexec-alpha==2.0", "pyexec-beta==1.0"}},
		{name: "PEP 723 in a script file", req: Request{ScriptPath: "scripts/tool.py"},
			stdout: "2.0\n", resolved: []string{"pyexec-alpha==2.0", "pyexec-beta==1.0"}},
		{name: "explicit dependencies add to PEP 723", req: Request{ScriptPath: "scripts/tool.py", Dependencies: []string{"pyexec-alpha<2"}},
			stdout: "1.0\n", resolved: []string{"pyexec-alpha==1.0", "pyexec-beta==1.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, e, tt.req)
			if !res.Success || res.Stdout != tt.stdout {
				t.Fatalf("stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
			}
			if res.ExecutionStrategy != StrategyUVEnv || !slices.Equal(res.ResolvedDependencies, tt.resolved) {
				t.Fatalf("strategy %q resolved %q, want uv-env %q", res.ExecutionStrategy, res.ResolvedDependencies, tt.resolved)
			}
			if !strings.HasPrefix(res.Executable, filepath.Join(e.Config().StateDir, "envs")) || !strings.HasPrefix(res.PythonVersionUsed, "3.") {
				t.Fatalf("executable %s version %s", res.Executable, res.PythonVersionUsed)
			}
		})
	}
	// Five requests, three distinct environments: the PEP 723 code, the
	// script file and the transitive list share one.
	if got := e.Environments().Builds(); got != 3 {
		t.Fatalf("%d environment builds, want 3", got)
	}
}

// TestRunDependenciesHotPath: the second identical request reuses the env and
// runs no uv (uv is made unavailable in between).
func TestRunDependenciesHotPath(t *testing.T) {
	e, _, _ := depsEngine(t)
	req := Request{Code: "import pyexec_beta; print('ok')", Dependencies: []string{"pyexec-beta"}}
	first := run(t, e, req)
	cfg := e.Config()
	cfg.Deps.UV = filepath.Join(t.TempDir(), "no-uv")
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	second := run(t, again, req)
	if second.Stdout != "ok\n" || second.Executable != first.Executable || again.Environments().Builds() != 0 {
		t.Fatalf("second run: %+v", second)
	}
	// Without uv, runs without dependencies still work; runs needing a new
	// env are rejected with the install hint.
	if res := run(t, again, Request{Code: "print('plain')"}); res.Stdout != "plain\n" || res.ExecutionStrategy != StrategySystem {
		t.Fatalf("plain run: %+v", res)
	}
	_, err = again.Run(context.Background(), Request{Code: "pass", Dependencies: []string{"pyexec-alpha==1.0"}}, nil)
	var rerr *RequestError
	if !errors.As(err, &rerr) || rerr.Field != "dependencies" || !strings.Contains(err.Error(), "pip install uv") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunDependencyErrors(t *testing.T) {
	e, _, _ := depsEngine(t)
	tests := []struct {
		name, field, want string
		req               Request
	}{
		{name: "conflict", field: "dependencies", want: "No solution found",
			req: Request{Code: "pass", Dependencies: []string{"pyexec-alpha==1.0", "pyexec-alpha==2.0"}}},
		{name: "misspelled package", field: "dependencies", want: "No solution found",
			req: Request{Code: "pass", Dependencies: []string{"pyexec-alhpa"}}},
		{name: "not a requirement", field: "dependencies", want: "package name",
			req: Request{Code: "pass", Dependencies: []string{"--index-url=http://evil"}}},
		{name: "broken PEP 723 block", field: "code", want: "not valid TOML",
			req: Request{Code: "# /// script\n# dependencies = [\n# ///\n"}},
		{name: "requires-python nobody satisfies", field: "python_version", want: "requires Python",
			req: Request{Code: "# /// script\n# requires-python = \">=9\"\n# dependencies = []\n# ///\n", Dependencies: []string{"pyexec-alpha"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Run(context.Background(), tt.req, nil)
			var rerr *RequestError
			if !errors.As(err, &rerr) || rerr.Field != tt.field || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a %s error containing %q", err, tt.field, tt.want)
			}
		})
	}
}

func TestRunInProject(t *testing.T) {
	e, ws, wheelDir := depsEngine(t)
	proj := filepath.Join(ws, "proj")
	writeFile(t, filepath.Join(proj, "pyproject.toml"), "[project]\nname = \"demo\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\ndependencies = [\"pyexec-beta\", \"pyexec-alpha<2\"]\n")
	uv, _ := uvenv.FindUV(os.Environ())
	lock := exec.Command(uv, "lock", "--offline", "--no-index", "--find-links", wheelDir, "--python", e.Config().Python)
	lock.Dir = proj
	lock.Env = append(os.Environ(), "UV_CACHE_DIR="+filepath.Join(e.Config().StateDir, "uv-cache"))
	if out, err := lock.CombinedOutput(); err != nil {
		t.Fatalf("uv lock: %v\n%s", err, out)
	}
	writeFile(t, filepath.Join(proj, "src", "main.py"), "import pyexec_alpha, pyexec_beta\nprint(pyexec_alpha.__version__)\n")
	code := "import pyexec_alpha; print(pyexec_alpha.__version__)"

	for _, req := range []Request{
		{ScriptPath: "proj/src/main.py"},
		{Code: code, Cwd: "proj/src"},
		{Code: code, Cwd: "proj", Dependencies: []string{"pyexec-tool"}},
	} {
		res := run(t, e, req)
		if res.Stdout != "1.0\n" || res.ExecutionStrategy != StrategyUVProject || !slices.Contains(res.ResolvedDependencies, "pyexec-beta==1.0") {
			t.Fatalf("%+v: %+v", req, res)
		}
	}
	// Outside the project, and with a PEP 723 block (which ignores projects
	// like `uv run --script`), the project is not used.
	if res := run(t, e, Request{Code: "print(1)"}); res.ExecutionStrategy != StrategySystem {
		t.Fatalf("outside the project: %s", res.ExecutionStrategy)
	}
	if res := run(t, e, Request{Code: pep723Beta, Cwd: "proj"}); res.ExecutionStrategy != StrategyUVEnv || res.Stdout != "2.0\n" {
		t.Fatalf("PEP 723 inside a project: %+v", res)
	}
	if got := e.Environments().Builds(); got != 3 {
		t.Fatalf("%d builds, want 3 (project, project+extra, PEP 723)", got)
	}

	// Without uv a new project env cannot be built: plain runs still work
	// (as they would without the project), runs with dependencies say why not.
	cfg := e.Config()
	cfg.Deps.UV = filepath.Join(t.TempDir(), "no-uv")
	cfg.StateDir = t.TempDir()
	noUV, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { noUV.Close() })
	if res := run(t, noUV, Request{Code: "print(1)", Cwd: "proj"}); res.ExecutionStrategy != StrategySystem || res.Stdout != "1\n" {
		t.Fatalf("project run without uv: %+v", res)
	}
	if _, err := noUV.Run(context.Background(), Request{Code: "pass", Cwd: "proj", Dependencies: []string{"pyexec-tool"}}, nil); err == nil || !strings.Contains(err.Error(), "pip install uv") {
		t.Fatalf("err = %v", err)
	}
	// NoProjects turns detection off.
	cfg.Deps.UV, cfg.Deps.NoProjects = "", true
	off, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { off.Close() })
	if res := run(t, off, Request{Code: "print(1)", Cwd: "proj"}); res.ExecutionStrategy != StrategySystem {
		t.Fatalf("NoProjects: %+v", res)
	}
}

// TestRunPEP723RequiresPythonAlone: a block with requires-python and no
// dependencies runs on a matching installed interpreter, no env built.
func TestRunPEP723RequiresPythonAlone(t *testing.T) {
	e, _, _ := depsEngine(t)
	def, err := e.DefaultInterpreter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var newer string
	for _, it := range e.Interpreters(context.Background()) {
		if ok, _ := uvenv.SatisfiesPython(it.Version, ">"+def.Version); ok {
			newer = it.Version
			break
		}
	}
	if newer == "" {
		t.Skipf("no interpreter newer than %s installed", def.Version)
	}
	res := run(t, e, Request{Code: "# /// script\n# requires-python = \">" + def.Version + "\"\n# ///\nimport sys; print('%d.%d.%d' % sys.version_info[:3])\n"})
	if res.Stdout != newer+"\n" || res.ExecutionStrategy != StrategySystem || e.Environments().Builds() != 0 {
		t.Fatalf("got %q (%s), want the newest interpreter %s", res.Stdout, res.ExecutionStrategy, newer)
	}
}

// envPhases records environment build phases (EnvironmentObserver).
type envPhases struct {
	mu     sync.Mutex
	phases []string
}

func (o *envPhases) Started(int)           {}
func (o *envPhases) Output(Stream, []byte) {}
func (o *envPhases) Environment(phase, _ string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := len(o.phases); n == 0 || o.phases[n-1] != phase {
		o.phases = append(o.phases, phase)
	}
}

func TestRunReportsEnvironmentPhases(t *testing.T) {
	e, _, _ := depsEngine(t)
	obs := &envPhases{}
	res, err := e.Run(context.Background(), Request{Code: "pass", Dependencies: []string{"pyexec-beta"}}, obs)
	if err != nil || !res.Success {
		t.Fatalf("%v %+v", err, res)
	}
	if want := []string{"creating", "resolving", "downloading", "installing", "done"}; !slices.Equal(obs.phases, want) {
		t.Fatalf("phases %q, want %q", obs.phases, want)
	}
}

package seedcompat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/mcpserver"
	"github.com/pyexec/pyexec/internal/scripts"
	"github.com/pyexec/pyexec/internal/testutil/mcptest"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// This file runs every usage example of the three seed READMEs
// (../../../shared/seeds) through a real MCP client, against pyexec with
// --toolsets all: once over in-memory transports, once against `pyexec mcp`
// started as a subprocess over stdio. Each example is called with the
// README's tool name and arguments; only absolute paths that name the
// README author's machine (/work/project, /path/to/.env, /opt/jobs) are
// relocated under a temporary root, and the README's "create these files"
// steps are done by the fixture. Examples that cannot run hermetically or
// need work not in this build are listed as skipped subtests saying where
// they are covered.

// seedEnv is one set of servers and fixtures.
type seedEnv struct {
	uvexec, pyexecutor, pymcp *mcp.ClientSession
	smart                     *mcp.ClientSession // python-executor-mcp's workspace with a 1 s smart-async budget
	root                      string             // where the README's absolute paths are relocated
	uvDir, pyexDir            string             // workspaces of the uv-exec-mcp and py-executor servers
	wheels                    string             // stand-in wheels for requests, pandas, numpy ("" without uv)
	waitAutosave              func()
}

// rel relocates a README path like /work/project under the fixture root.
func (e *seedEnv) rel(p string) string { return filepath.Join(e.root, p) }

type seedExample struct {
	seed, example string
	server        func(*seedEnv) *mcp.ClientSession
	tool          string
	args          func(*seedEnv) map[string]any
	check         func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool)
	// skip says why the example is not run here and where it is covered.
	skip string
	// deps marks examples that install dependencies (skipped without uv).
	deps bool
	// run replaces server/tool/args/check for examples of several steps.
	run func(t *testing.T, e *seedEnv)
}

// server is one pyexec MCP server of the test.
type server struct {
	workspace  string
	maxWorkers int
	budget     time.Duration // smart-async budget; 0: the default (20 s)
}

func (e *seedEnv) servers() []struct {
	dst **mcp.ClientSession
	server
} {
	return []struct {
		dst **mcp.ClientSession
		server
	}{{&e.uvexec, server{e.uvDir, 0, 0}}, {&e.pyexecutor, server{e.pyexDir, 4, 0}}, {&e.pymcp, server{"/tmp", 0, 0}}, {&e.smart, server{"/tmp", 0, smartBudget}}}
}

func TestSeedExamplesInMemory(t *testing.T) {
	e := newSeedFixtures(t)
	var stores []*scripts.Store
	for _, s := range e.servers() {
		state := t.TempDir()
		cfg := engine.Config{Workspace: s.workspace, StateDir: state}
		if e.wheels != "" {
			cfg.Deps = engine.DepsConfig{Index: uvenv.IndexSettings{NoIndex: true, Offline: true, FindLinks: []string{e.wheels}}}
		}
		eng, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		store, err := scripts.Open(state, scripts.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		stores = append(stores, store)
		lj, err := executor.OpenLocalJobs(context.Background(), executor.NewLocal(eng, "test", s.maxWorkers), jobs.Config{StateDir: state})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lj.Close(context.Background()) })
		all, _ := mcpserver.ParseToolsets("all")
		*s.dst = mcptest.Connect(t, mcpserver.New(lj, mcpserver.Options{Version: "test", Toolsets: all, Scripts: executor.LocalScripts{Store: store, Jobs: lj}, SyncBudget: s.budget}))
	}
	e.waitAutosave = func() {
		for _, s := range stores {
			s.Flush()
		}
	}
	runSeedExamples(t, e)
}

func TestSeedExamplesSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts pyexec mcp subprocesses")
	}
	e := newSeedFixtures(t)
	for _, s := range e.servers() {
		args := []string{"mcp", "--toolsets", "all", "--workspace", s.workspace, "--state-dir", t.TempDir(), "--log-level", "warn"}
		if s.budget > 0 {
			args = append(args, "--sync-budget", fmt.Sprint(s.budget.Seconds()))
		}
		if s.maxWorkers > 0 {
			args = append(args, "--max-workers", fmt.Sprint(s.maxWorkers))
		}
		if e.wheels != "" {
			args = append(args, "--no-index", "--offline", "--find-links", e.wheels)
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), asCLI+"=1")
		*s.dst = mcptest.Command(t, cmd)
	}
	e.waitAutosave = func() {
		// The subprocess writes autosaves in the background: poll briefly.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			out, _, _ := tryCall(e.pymcp, "py_list_scripts", map[string]any{"include_autosaved": true})
			if n, _ := out["count"].(float64); n >= 5 {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	runSeedExamples(t, e)
}

// smartBudget is the smart-async budget of the server the README's
// smart-async example runs on: short, so it switches to the background soon.
const smartBudget = time.Second

func tryCall(cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, string, bool) {
	out, text, isErr, _ := mcptest.TryCall(cs, tool, args)
	return out, text, isErr
}

func runSeedExamples(t *testing.T, e *seedEnv) {
	if !strings.HasPrefix(e.root, "/tmp/") {
		t.Skipf("the python-executor-mcp examples use directory=/tmp; this machine's temp dir is %s", e.root)
	}
	for i, ex := range seedExamples() {
		t.Run(fmt.Sprintf("%02d_%s/%s", i, ex.seed, ex.example), func(t *testing.T) {
			if ex.skip != "" {
				t.Skip(ex.skip)
			}
			if ex.deps && e.wheels == "" {
				t.Skip("uv is not installed: dependency examples cannot run")
			}
			if ex.run != nil {
				ex.run(t, e)
				return
			}
			out, text, isErr := mcptest.Call(t, ex.server(e), ex.tool, ex.args(e))
			ex.check(t, e, out, text, isErr)
		})
	}
}

// newSeedFixtures creates what the READMEs tell their users to create.
func newSeedFixtures(t *testing.T) *seedEnv {
	t.Helper()
	root := t.TempDir()
	// The python-executor-mcp examples take /tmp itself as the workspace:
	// its runs (as nobody) reach the fixtures below only through
	// directories any user may search, as with any user's files there
	// (t.TempDir's own parent is 0700). pyexec binds nothing of a workspace
	// by name: a run could have made the name a symlink.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e := &seedEnv{root: root, uvDir: filepath.Join(root, "my_python_scripts"), pyexDir: filepath.Join(root, "py-executor-work")}

	// The packages the examples install (requests, pandas, numpy) come from
	// the internet; hermetic stand-in wheels with the same names and the
	// attributes the examples use are served to uv offline instead.
	if _, err := uvenv.FindUV(os.Environ()); err == nil {
		e.wheels = wheels.Dir(t,
			wheels.Package{Name: "requests", Version: "2.32.3", Files: map[string]string{"__init__.py": "'Stand-in for requests.'\n__version__ = '2.32.3'\n"}},
			wheels.Package{Name: "pandas", Version: "2.2.3", Files: map[string]string{"__init__.py": pandasStandIn + "\n__version__ = '2.2.3'\n"}},
			wheels.Package{Name: "numpy", Version: "2.1.0", Files: map[string]string{"__init__.py": "'Stand-in for numpy.'\nfrom math import sqrt\n__version__ = '2.1.0'\n"}},
		)
	}

	// uv-exec-mcp "Setup Your Working Directory" and "Running Tests".
	mcptest.WriteFile(t, filepath.Join(e.uvDir, "hello.py"), `print("Hello from UV HTTP MCP!")`+"\n")
	mcptest.WriteFile(t, filepath.Join(e.uvDir, "time_test.py"), `print("Current time:", __import__("datetime").datetime.now())`+"\n")
	mcptest.WriteFile(t, filepath.Join(e.uvDir, "args_test.py"), `import sys; print("Args:", sys.argv[1:])`+"\n")
	mcptest.WriteFile(t, filepath.Join(e.uvDir, "slow_test.py"), `import time; time.sleep(2); print("Done")`+"\n")
	mcptest.WriteFile(t, filepath.Join(e.uvDir, "notes.txt"), "not python\n")
	mcptest.WriteFile(t, filepath.Join(e.uvDir, "project", "pyproject.toml"), "[project]\nname = \"seed-project\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\ndependencies = [\"requests\"]\n")
	mcptest.WriteFile(t, filepath.Join(e.uvDir, "project", "main.py"), "import requests\nprint('project sees requests', requests.__version__)\n")
	// "Script Types Supported": a PEP 723 script, verbatim from the README
	// plus a line that shows the packages were importable.
	mcptest.WriteFile(t, filepath.Join(e.uvDir, "pep723_test.py"), "#!/usr/bin/env -S uv run\n# /// script\n# dependencies = [\"requests\", \"pandas\"]\n# ///\nimport requests\nimport pandas\nprint('requests', requests.__version__, 'pandas', pandas.__version__)\n")

	// py-executor: the files its examples read, and a .venv in the working
	// directory (the seed uses <cwd>/.venv/bin/python when present) holding
	// a pandas stand-in: real pandas needs the internet.
	mcptest.WriteFile(t, filepath.Join(e.pyexDir, "data.txt"), "twelve bytes")
	for i := 1; i <= 3; i++ {
		mcptest.WriteFile(t, filepath.Join(e.pyexDir, fmt.Sprintf("file%d.txt", i)), strings.Repeat("x", i*10))
		mcptest.WriteFile(t, filepath.Join(e.pyexDir, fmt.Sprintf("data%d.csv", i)), "a,b\n"+strings.Repeat("1,2\n", i))
	}
	venv := filepath.Join(e.pyexDir, ".venv")
	if out, err := exec.Command("python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("create .venv: %v\n%s", err, out)
	}
	sitePkgs, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	if len(sitePkgs) != 1 {
		t.Fatalf("site-packages of the .venv: %v", sitePkgs)
	}
	mcptest.WriteFile(t, filepath.Join(sitePkgs[0], "pandas", "__init__.py"), pandasStandIn)

	// python-executor-mcp: the README's directories and files, relocated.
	mcptest.WriteFile(t, e.rel("work/project/main.py"), "import os, sys\nprint('main.py on Python', sys.version.split()[0])\nprint('DATABASE_URL', os.getenv('DATABASE_URL'))\nprint('DEBUG', os.getenv('DEBUG'))\n")
	mcptest.WriteFile(t, e.rel("opt/jobs/long_task.py"), "import time\nfor i in range(5):\n    print('step', i, flush=True)\n    time.sleep(0.2)\nprint('done')\n")
	mcptest.WriteFile(t, e.rel("work/test.py"), "import os\nprint(os.getenv('MY_VAR'))\n")
	mcptest.WriteFile(t, e.rel("work/.env"), "MY_VAR=from_file\n")
	mcptest.WriteFile(t, e.rel("path/to/.env"), `# Comments are supported
DATABASE_URL=postgresql://localhost/testdb
API_KEY="secret123"
DEBUG=true
QUOTED='single quotes work too'
MULTILINE_VAR="line1
line2
line3"
MY_VAR=from_file
`)
	return e
}

// pandasStandIn implements exactly the pandas calls the py-executor README
// makes (DataFrame(dict).sum(), read_csv(path).shape), printing like pandas.
const pandasStandIn = `"""Stand-in for the pandas calls in the py-executor README (real pandas needs the internet)."""
import csv


class Series(dict):
    def __str__(self):
        return "\n".join(f"{k}    {v}" for k, v in self.items()) + "\ndtype: int64"


class DataFrame:
    def __init__(self, data):
        self._data = {k: list(v) for k, v in data.items()}

    @property
    def shape(self):
        return (len(next(iter(self._data.values()), [])), len(self._data))

    def sum(self):
        return Series({k: sum(v) for k, v in self._data.items()})


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return DataFrame({h: [int(r[i]) for r in rows[1:]] for i, h in enumerate(rows[0])})
`

// --- checks ---

func wantOK(t *testing.T, out map[string]any, text string, isErr bool) {
	t.Helper()
	if isErr {
		t.Fatalf("tool error: %s", text)
	}
	if out["exit_code"] != float64(0) {
		t.Fatalf("exit_code = %v; stderr %q", out["exit_code"], out["stderr"])
	}
}

// wantFields checks that the seed's documented result fields are present.
func wantFields(t *testing.T, out map[string]any, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if _, ok := out[f]; !ok {
			t.Errorf("result lacks the seed's field %q: %v", f, out)
		}
	}
}

func wantStdout(want string) func(*testing.T, *seedEnv, map[string]any, string, bool) {
	return func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
		t.Helper()
		wantOK(t, out, text, isErr)
		if out["stdout"] != want {
			t.Errorf("stdout = %q, want %q", out["stdout"], want)
		}
	}
}

func wantToolError(sub string) func(*testing.T, *seedEnv, map[string]any, string, bool) {
	return func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
		t.Helper()
		if !isErr || !strings.Contains(text, sub) {
			t.Errorf("want a tool error mentioning %q, got isError=%t %q %v", sub, isErr, text, out)
		}
	}
}

// pyexecMCPRun checks run_script_in_dir / run_script_with_dependencies
// results: RunScriptResult's fields, and stdout.
func pyexecMCPRun(want string, extra ...string) func(*testing.T, *seedEnv, map[string]any, string, bool) {
	return func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
		t.Helper()
		wantOK(t, out, text, isErr)
		wantFields(t, out, append([]string{"stdout", "stderr", "exit_code", "execution_strategy", "elapsed_seconds"}, extra...)...)
		if out["stdout"] != want {
			t.Errorf("stdout = %q, want %q", out["stdout"], want)
		}
	}
}

func static(m map[string]any) func(*seedEnv) map[string]any {
	return func(*seedEnv) map[string]any { return m }
}

func uv(e *seedEnv) *mcp.ClientSession    { return e.uvexec }
func pyex(e *seedEnv) *mcp.ClientSession  { return e.pyexecutor }
func pymcp(e *seedEnv) *mcp.ClientSession { return e.pymcp }

const (
	uvSeed   = "uv-exec-mcp"
	pyexSeed = "py-executor"
	mcpSeed  = "python-executor-mcp"
)

const (
	restCovered = "the execution server's HTTP API: run against pyexec serve in TestSeedUVExecTwoServers (with the MCP front end reaching it through EXECUTION_SERVER_URL)"
)

func seedExamples() []seedExample {
	files4 := []any{"file1.py", "file2.py", "file3.py", "file4.py"}
	var files100 []any
	for i := 1; i <= 100; i++ {
		files100 = append(files100, fmt.Sprintf("file%d.py", i))
	}
	var large strings.Builder
	for i := 0; large.Len() < 700_000; i++ {
		fmt.Fprintf(&large, "process_data('file%d')\n", i)
	}
	largeCode := large.String()

	return []seedExample{
		// ---------------- uv-exec-mcp ----------------
		{seed: uvSeed, example: "Execute the hello.py script", server: uv, tool: "execute_python_script",
			args: static(map[string]any{"script_path": "hello.py"}), check: wantStdout("Hello from UV HTTP MCP!\n")},
		{seed: uvSeed, example: "Run time_test.py and show me the output", server: uv, tool: "execute_python_script",
			args: static(map[string]any{"script_path": "time_test.py"}),
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				wantOK(t, out, text, isErr)
				if !strings.HasPrefix(out["stdout"].(string), "Current time: ") {
					t.Errorf("stdout = %q", out["stdout"])
				}
			}},
		{seed: uvSeed, example: "Check if the execution server is running", server: uv, tool: "check_execution_server",
			args: static(nil),
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				if isErr || out["status"] != "healthy" || out["healthy"] != true || out["mode"] != "embedded" || out["working_directory"] != e.uvDir {
					t.Errorf("check_execution_server = %v %q", out, text)
				}
			}},
		{seed: uvSeed, example: "execute_python_script(script_path, timeout=10) as in the curl body", server: uv, tool: "execute_python_script",
			args: static(map[string]any{"script_path": "hello.py", "timeout": 10}),
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				wantStdout("Hello from UV HTTP MCP!\n")(t, e, out, text, isErr)
				if out["working_directory"] != e.uvDir || out["script_path"] != "hello.py" {
					t.Errorf("result = %v", out)
				}
			}},
		{seed: uvSeed, example: "args_test.py", server: uv, tool: "execute_python_script",
			args: static(map[string]any{"script_path": "args_test.py"}), check: wantStdout("Args: []\n")},
		{seed: uvSeed, example: "slow_test.py", server: uv, tool: "execute_python_script",
			args: static(map[string]any{"script_path": "slow_test.py"}), check: wantStdout("Done\n")},
		{seed: uvSeed, example: "Timeout Protection: terminated after the timeout", server: uv, tool: "execute_python_script",
			args: static(map[string]any{"script_path": "slow_test.py", "timeout": 1}),
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				if isErr || out["timed_out"] != true || out["success"] != false || !strings.Contains(out["stderr"].(string), "[TIMEOUT]") {
					t.Errorf("result = %v %q", out, text)
				}
			}},
		{seed: uvSeed, example: "test_hello_world_http(timeout=30)", server: uv, tool: "test_hello_world_http",
			args: static(map[string]any{"timeout": 30}),
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				wantOK(t, out, text, isErr)
				if !strings.HasPrefix(out["stdout"].(string), "Hello World from pyexec!\nPython ") {
					t.Errorf("stdout = %q", out["stdout"])
				}
			}},
		{seed: uvSeed, example: "test_minimal_http(timeout=10)", server: uv, tool: "test_minimal_http",
			args: static(nil), check: wantStdout("minimal test OK\n")},
		{seed: uvSeed, example: "get_http_server_info()", server: uv, tool: "get_http_server_info",
			args: static(nil),
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				if isErr || out["mode"] != "embedded" || out["transport"] != "in-process" || out["working_directory"] != e.uvDir ||
					!strings.Contains(out["architecture"].(string), "no execution server") || len(out["security"].([]any)) == 0 {
					t.Errorf("get_http_server_info = %v %q", out, text)
				}
			}},
		{seed: uvSeed, example: "Path traversal is prevented (no ../ allowed)", server: uv, tool: "execute_python_script",
			args: static(map[string]any{"script_path": "../py-executor-work/data.txt.py"}), check: wantToolError("outside the workspace")},
		{seed: uvSeed, example: "Only .py files can be executed", server: uv, tool: "execute_python_script",
			args: static(map[string]any{"script_path": "notes.txt"}), check: wantToolError("not a .py file")},
		{seed: uvSeed, example: "PEP 723 script with dependencies requests, pandas (stand-in wheels)", server: uv, tool: "execute_python_script", deps: true,
			args: static(map[string]any{"script_path": "pep723_test.py", "timeout": 120}),
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				wantStdout("requests 2.32.3 pandas 2.2.3\n")(t, e, out, text, isErr)
				if out["execution_strategy"] != "uv-env" || !reflect.DeepEqual(out["resolved_dependencies"], []any{"pandas==2.2.3", "requests==2.32.3"}) {
					t.Errorf("result = %v", out)
				}
			}},
		{seed: uvSeed, example: "Project scripts: a script in a directory with pyproject.toml", server: uv, tool: "execute_python_script", deps: true,
			args: static(map[string]any{"script_path": "project/main.py", "timeout": 120}),
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				wantStdout("project sees requests 2.32.3\n")(t, e, out, text, isErr)
				if out["execution_strategy"] != "uv-project" {
					t.Errorf("execution_strategy = %v", out["execution_strategy"])
				}
			}},
		{seed: uvSeed, example: "curl http://127.0.0.1:8080/health and POST /execute", skip: restCovered},
		{seed: uvSeed, example: "echo '{\"method\": \"tools/call\", ...}' | mcp_http_client.py", skip: "a bare line without jsonrpc/id is not a JSON-RPC request for any MCP server; the same call through a real client is example 02 (check_execution_server), and pyexec mcp over stdio is TestSeedExamplesSubprocess"},
		{seed: uvSeed, example: "mcp dev ../mcp_http_client.py (MCP inspector)", skip: "interactive Node.js inspector; the subprocess test is the scripted equivalent"},

		// ---------------- py-executor ----------------
		{seed: pyexSeed, example: "Why: print(\"Hello 'world' with \\\"quotes\\\" and $variables\")", server: pyex, tool: "run_python",
			args:  static(map[string]any{"code": `print("Hello 'world' with \"quotes\" and $variables")`}),
			check: wantStdout("Hello 'world' with \"quotes\" and $variables\n")},
		{seed: pyexSeed, example: "run_python simple calculation", server: pyex, tool: "run_python",
			args: static(map[string]any{"code": "result = 2 + 2\nprint(f'Result: {result}')"}),
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				wantStdout("Result: 4\n")(t, e, out, text, isErr)
				wantFields(t, out, "stdout", "stderr", "exit_code", "success", "executable")
				if out["success"] != true || !strings.HasPrefix(out["executable"].(string), filepath.Join(e.pyexDir, ".venv")) {
					t.Errorf("the cwd's .venv was not used: %v", out)
				}
			}},
		{seed: pyexSeed, example: "run_python data analysis with pandas (stand-in module in the cwd's .venv)", server: pyex, tool: "run_python",
			args: static(map[string]any{"code": "import pandas as pd\ndf = pd.DataFrame({'a': [1,2,3]})\nprint(df.sum())"}),
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				wantStdout("a    6\ndtype: int64\n")(t, e, out, text, isErr)
				if out["execution_strategy"] != "venv" {
					t.Errorf("execution_strategy = %v", out["execution_strategy"])
				}
			}},
		{seed: pyexSeed, example: "run_python file processing", server: pyex, tool: "run_python",
			args:  static(map[string]any{"code": "with open('data.txt', 'r') as f:\n    content = f.read()\n    print(len(content))"}),
			check: wantStdout("12\n")},
		{seed: pyexSeed, example: "run_python_batch processing multiple files", server: pyex, tool: "run_python_batch",
			args: static(map[string]any{"codes": []string{
				"with open('file1.txt', 'r') as f: print(len(f.read()))",
				"with open('file2.txt', 'r') as f: print(len(f.read()))",
				"with open('file3.txt', 'r') as f: print(len(f.read()))",
			}}),
			check: batchStdout("10\n", "20\n", "30\n")},
		{seed: pyexSeed, example: "run_python_batch pandas read_csv (stand-in)", server: pyex, tool: "run_python_batch",
			args: static(map[string]any{"codes": []string{
				"import pandas as pd; df = pd.read_csv('data1.csv'); print(df.shape)",
				"import pandas as pd; df = pd.read_csv('data2.csv'); print(df.shape)",
				"import pandas as pd; df = pd.read_csv('data3.csv'); print(df.shape)",
			}}),
			check: batchStdout("(1, 2)\n", "(2, 2)\n", "(3, 2)\n")},
		{seed: pyexSeed, example: "run_python_batch independent calculations", server: pyex, tool: "run_python_batch",
			args: static(map[string]any{"codes": []string{
				"result = sum(range(1000)); print(result)",
				"import math; result = math.factorial(10); print(result)",
				"import random; result = [random.randint(1, 100) for _ in range(5)]; print(result)",
			}}),
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				res := batchResults(t, out, text, isErr, 3)
				if res[0]["stdout"] != "499500\n" || res[1]["stdout"] != "3628800\n" {
					t.Errorf("results = %v", res)
				}
				var nums []int
				if err := json.Unmarshal([]byte(res[2]["stdout"].(string)), &nums); err != nil || len(nums) != 5 {
					t.Errorf("random list = %q", res[2]["stdout"])
				}
			}},
		{seed: pyexSeed, example: "chunk_by_count(files, 2) via plan_batch", server: pyex, tool: "plan_batch",
			args: static(map[string]any{"items": files4, "complexity": "low", "max_workers": 2}),
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				want := []any{[]any{"file1.py", "file2.py"}, []any{"file3.py", "file4.py"}}
				if isErr || !reflect.DeepEqual(out["chunks"], want) || out["workers"] != float64(2) {
					t.Errorf("plan = %v %q", out, text)
				}
			}},
		{seed: pyexSeed, example: "chunk_by_size(large_code, 500000) via chunk_code", server: pyex, tool: "chunk_code",
			args: static(map[string]any{"code": largeCode, "max_bytes": 500000}),
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				chunks, _ := out["chunks"].([]any)
				var joined strings.Builder
				for _, c := range chunks {
					if len(c.(string)) > 500000 || !strings.HasSuffix(c.(string), "\n") {
						t.Errorf("chunk of %d bytes", len(c.(string)))
					}
					joined.WriteString(c.(string))
				}
				if isErr || len(chunks) != 2 || joined.String() != largeCode {
					t.Errorf("%d chunks, join ok %t, %q", len(chunks), joined.String() == largeCode, text)
				}
			}},
		{seed: pyexSeed, example: "suggest_batch_size(len(files), \"low\") returns 4", server: pyex, tool: "plan_batch",
			args: static(map[string]any{"items": files100, "complexity": "low"}), check: planWorkers(4)},
		{seed: pyexSeed, example: "suggest_batch_size(len(files), \"high\") returns 2", server: pyex, tool: "plan_batch",
			args: static(map[string]any{"items": files100, "complexity": "high"}), check: planWorkers(2)},
		{seed: pyexSeed, example: "codes from chunks, run_python_batch(codes, max_workers=workers)", server: pyex, tool: "run_python_batch",
			args:  static(map[string]any{"codes": []string{"print(len(['file1.py', 'file2.py']))", "print(len(['file3.py', 'file4.py']))"}, "max_workers": 2}),
			check: batchStdout("2\n", "2\n")},

		// ---------------- python-executor-mcp ----------------
		{seed: mcpSeed, example: "8.1 run_script_in_dir existing script, use_uv, python_version 3.13, timeout 300", server: pymcp, tool: "run_script_in_dir",
			args: func(e *seedEnv) map[string]any {
				return map[string]any{"directory": e.rel("/work/project"), "script_path": "main.py", "use_uv": true, "python_version": "3.13", "timeout_seconds": 300}
			},
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				pyexecMCPRun("main.py on Python "+fmt.Sprint(out["python_version_used"])+"\nDATABASE_URL None\nDEBUG None\n")(t, e, out, text, isErr)
				if !strings.HasPrefix(fmt.Sprint(out["python_version_used"]), "3.13") {
					t.Errorf("python_version_used = %v", out["python_version_used"])
				}
			}},
		{seed: mcpSeed, example: "8.2 run_script_in_dir inline code in /tmp, use_uv false", server: pymcp, tool: "run_script_in_dir",
			args: static(map[string]any{"directory": "/tmp", "script_content": "print('Hello world')", "use_uv": false}), check: pyexecMCPRun("Hello world\n")},
		{seed: mcpSeed, example: "markdown_output=False gives the structured payload as text", server: pymcp, tool: "run_script_in_dir",
			args: static(map[string]any{"directory": "/tmp", "script_content": "print('Hello world')", "markdown_output": false}),
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				var m map[string]any
				if isErr || json.Unmarshal([]byte(text), &m) != nil || m["stdout"] != "Hello world\n" {
					t.Errorf("text content is not the JSON result: %q", text)
				}
			}},
		{seed: mcpSeed, example: "8.3 run_script_with_dependencies requests (stand-in wheel)", server: pymcp, tool: "run_script_with_dependencies", deps: true,
			args: static(map[string]any{"script_content": "import requests; print(requests.__version__)", "python_version": "3.13", "dependencies": []string{"requests"}}),
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				pyexecMCPRun("2.32.3\n", "resolved_dependencies", "python_version_used")(t, e, out, text, isErr)
				if !reflect.DeepEqual(out["resolved_dependencies"], []any{"requests==2.32.3"}) || !strings.HasPrefix(fmt.Sprint(out["python_version_used"]), "3.13") {
					t.Errorf("result = %v", out)
				}
			}},
		{seed: mcpSeed, example: "8.4 benchmark_script", server: pymcp, tool: "benchmark_script",
			args: static(map[string]any{"script_content": "print(sum(i*i for i in range(500000)))", "python_version": "3.13", "dependencies": []string{}}),
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				pyexecMCPRun("41666541666750000\n", "resolved_dependencies", "python_version_used", "wall_time_seconds", "cpu_time_seconds", "peak_rss_mb")(t, e, out, text, isErr)
				if out["wall_time_seconds"].(float64) <= 0 || out["cpu_time_seconds"].(float64) <= 0 || out["peak_rss_mb"].(float64) < 1 ||
					!strings.HasPrefix(out["python_version_used"].(string), "3.13") || len(out["resolved_dependencies"].([]any)) != 0 {
					t.Errorf("benchmark = %v", out)
				}
			}},
		{seed: mcpSeed, example: "benchmark_script sample_interval (accepted, ignored: exact RSS)", server: pymcp, tool: "benchmark_script",
			args: static(map[string]any{"script_content": "x = bytearray(50 * 1024 * 1024)", "sample_interval": 0.05}),
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				if isErr || out["peak_rss_mb"].(float64) < 50 || !strings.Contains(fmt.Sprint(out["note"]), "sample_interval") {
					t.Errorf("benchmark = %v %q", out, text)
				}
			}},
		{seed: mcpSeed, example: "8.5 run_script_in_dir_async + job-stream:// + get_job_output", run: example85},
		{seed: mcpSeed, example: "8.6 run_script_with_dependencies_async", run: example86},
		{seed: mcpSeed, example: "8.7 environment variables", server: pymcp, tool: "run_script_with_dependencies",
			args: static(map[string]any{
				"script_content": "\nimport os\nprint(f\"DB: {os.getenv('DATABASE_URL')}\")\nprint(f\"Key: {os.getenv('API_KEY')}\")\n",
				"python_version": "3.13", "dependencies": []string{},
				"env_vars": map[string]string{"DATABASE_URL": "postgresql://localhost/mydb", "API_KEY": "sk-test-123"},
			}),
			check: pyexecMCPRun("DB: postgresql://localhost/mydb\nKey: sk-test-123\n", "resolved_dependencies", "python_version_used")},
		{seed: mcpSeed, example: "8.8 py_job_status / smart-async job tracking", run: example88},
		{seed: mcpSeed, example: "8.9 kill_job", run: example89},
		{seed: mcpSeed, example: "6.2 py_job_status, py_list_jobs, py_cancel_job, py_prune_jobs", run: example62jobs},
		{seed: mcpSeed, example: "4.3 list_running_jobs, get_job_output, kill_job", run: example43},
		{seed: mcpSeed, example: "16 combined workflow (numpy stand-in, async, job-stream)", deps: true, run: example16},
		{seed: mcpSeed, example: "7.1 env_vars dict with run_script_in_dir", server: pymcp, tool: "run_script_in_dir",
			args: func(e *seedEnv) map[string]any {
				return map[string]any{"directory": e.rel("/work/project"), "script_path": "main.py",
					"env_vars": map[string]string{"DATABASE_URL": "postgresql://localhost/db", "API_KEY": "secret123", "DEBUG": "true"}}
			},
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				wantOK(t, out, text, isErr)
				if !strings.HasSuffix(out["stdout"].(string), "\nDATABASE_URL postgresql://localhost/db\nDEBUG true\n") {
					t.Errorf("stdout = %q", out["stdout"])
				}
			}},
		{seed: mcpSeed, example: "7.2 env_file with run_script_with_dependencies", server: pymcp, tool: "run_script_with_dependencies",
			args: func(e *seedEnv) map[string]any {
				return map[string]any{"script_content": "import os; print(os.getenv('MY_VAR'))", "python_version": "3.13", "env_file": e.rel("/path/to/.env")}
			},
			check: pyexecMCPRun("from_file\n")},
		{seed: mcpSeed, example: "7.2 the documented .env format (comments, quotes, multi-line)", server: pymcp, tool: "run_script_with_dependencies",
			args: func(e *seedEnv) map[string]any {
				return map[string]any{"script_content": "import os\nfor k in ['DATABASE_URL', 'API_KEY', 'DEBUG', 'QUOTED', 'MULTILINE_VAR']:\n    print(k, repr(os.getenv(k)))\n", "env_file": e.rel("/path/to/.env")}
			},
			check: pyexecMCPRun("DATABASE_URL 'postgresql://localhost/testdb'\nAPI_KEY 'secret123'\nDEBUG 'true'\nQUOTED 'single quotes work too'\nMULTILINE_VAR 'line1\\nline2\\nline3'\n")},
		{seed: mcpSeed, example: "7.3 precedence: env_vars override env_file", server: pymcp, tool: "run_script_in_dir",
			args: func(e *seedEnv) map[string]any {
				return map[string]any{"directory": e.rel("/work"), "script_path": "test.py", "env_file": e.rel("/work/.env"), "env_vars": map[string]string{"MY_VAR": "from_dict"}}
			},
			check: pyexecMCPRun("from_dict\n")},
		{seed: mcpSeed, example: "18 timeout edge case timeout_seconds=1 (stderr gets [TIMEOUT], partial output kept)", server: pymcp, tool: "run_script_in_dir",
			args: static(map[string]any{"directory": "/tmp", "script_content": "import time\nprint('started')\ntime.sleep(10)", "timeout_seconds": 1}),
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				if isErr || out["timed_out"] != true || out["stdout"] != "started\n" || !strings.Contains(out["stderr"].(string), "[TIMEOUT]") {
					t.Errorf("result = %v %q", out, text)
				}
			}},
		{seed: mcpSeed, example: "9 ValueError: both script_path and script_content", server: pymcp, tool: "run_script_in_dir",
			args:  static(map[string]any{"directory": "/tmp", "script_path": "x.py", "script_content": "pass"}),
			check: wantToolError("not both")},
		{seed: mcpSeed, example: "9 FileNotFoundError: missing directory", server: pymcp, tool: "run_script_in_dir",
			args:  static(map[string]any{"directory": "/tmp/pyexec-no-such-dir-for-sure", "script_content": "pass"}),
			check: wantToolError("does not exist")},
		{seed: mcpSeed, example: "9 FileNotFoundError: missing env_file", server: pymcp, tool: "run_script_with_dependencies",
			args:  static(map[string]any{"script_content": "pass", "env_file": "/tmp/pyexec-no-such-dir-for-sure/.env"}),
			check: wantToolError("env_file")},
		{seed: mcpSeed, example: "py_list_scripts(include_autosaved=True) shows the inline runs above", server: pymcp, tool: "py_list_scripts",
			args: func(e *seedEnv) map[string]any {
				e.waitAutosave() // autosave is written in the background
				return map[string]any{"include_autosaved": true}
			},
			check: func(t *testing.T, e *seedEnv, out map[string]any, text string, isErr bool) {
				list, _ := out["scripts"].([]any)
				if isErr || len(list) < 5 || list[len(list)-1].(map[string]any)["autosaved"] != true {
					t.Errorf("py_list_scripts = %v %q", out, text)
				}
			}},
		{seed: mcpSeed, example: "6.5 @smart_async decorator and create_progress_callback (the seed's Python API)", skip: "an API of the seed's own source code, not an MCP call; pyexec's equivalents are the smart-async handoff of every run tool and pyexec_progress.report (example 8.8)"},
		{seed: mcpSeed, example: "py_view_script(script_name) of a manually saved script", server: pymcp, tool: "py_view_script",
			args: func(e *seedEnv) map[string]any {
				// The seed's scripts/ were files put there by hand; pyexec saves them with save_script.
				if out, text, isErr := tryCall(e.pymcp, "save_script", map[string]any{"name": "report", "code": "\"\"\"Monthly report.\"\"\"\nprint('report')\n"}); isErr {
					panic(fmt.Sprint("save_script: ", out, text))
				}
				return map[string]any{"script_name": "report"}
			},
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				if isErr || out["name"] != "report" || out["description"] != "Monthly report." || out["autosaved"] != false || !strings.Contains(out["source"].(string), "print('report')") {
					t.Errorf("py_view_script = %v %q", out, text)
				}
			}},
		{seed: mcpSeed, example: "py_list_scripts() lists only manually saved scripts", server: pymcp, tool: "py_list_scripts",
			args: static(nil),
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				if list, _ := out["scripts"].([]any); isErr || out["count"] != float64(1) || list[0].(map[string]any)["name"] != "report" {
					t.Errorf("py_list_scripts = %v %q", out, text)
				}
			}},
		{seed: mcpSeed, example: "py_view_script(script_name, autosaved=True) shows code and sidecar", server: pymcp, tool: "py_view_script",
			args: func(e *seedEnv) map[string]any {
				return map[string]any{"script_name": newestAutosaved(e), "autosaved": true}
			},
			check: func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
				side, _ := out["sidecar"].(map[string]any)
				if isErr || out["source"] == "" || side == nil || side["tool"] == "" || side["arguments"] == nil {
					t.Errorf("py_view_script = %v %q", out, text)
				}
			}},
	}
}

// newestAutosaved waits for the autosave writer, then names the newest
// autosaved run (whose sidecar py_view_script should show).
func newestAutosaved(e *seedEnv) string {
	e.waitAutosave()
	out, _, _ := tryCall(e.pymcp, "py_list_scripts", map[string]any{"include_autosaved": true})
	list, _ := out["scripts"].([]any)
	for _, x := range list { // saved scripts first, then autosaved ones newest first
		if m := x.(map[string]any); m["autosaved"] == true {
			return m["name"].(string)
		}
	}
	return "none"
}

func batchResults(t *testing.T, out map[string]any, text string, isErr bool, n int) []map[string]any {
	t.Helper()
	raw, _ := out["results"].([]any)
	if isErr || len(raw) != n {
		t.Fatalf("batch = %v %q", out, text)
	}
	res := make([]map[string]any, n)
	for i, r := range raw {
		res[i] = r.(map[string]any)
		if res[i]["index"] != float64(i) || res[i]["success"] != true {
			t.Errorf("result %d = %v", i, res[i])
		}
	}
	return res
}

func batchStdout(want ...string) func(*testing.T, *seedEnv, map[string]any, string, bool) {
	return func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
		res := batchResults(t, out, text, isErr, len(want))
		for i, w := range want {
			if res[i]["stdout"] != w {
				t.Errorf("results[%d].stdout = %q, want %q", i, res[i]["stdout"], w)
			}
		}
	}
}

func planWorkers(n int) func(*testing.T, *seedEnv, map[string]any, string, bool) {
	return func(t *testing.T, _ *seedEnv, out map[string]any, text string, isErr bool) {
		sizes, _ := out["chunk_sizes"].([]any)
		if isErr || out["workers"] != float64(n) || len(sizes) != n || out["total_items"] != float64(100) {
			t.Errorf("plan = %v %q", out, text)
		}
	}
}

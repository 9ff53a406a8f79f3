package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/testutil/mcptest"
	"github.com/pyexec/pyexec/internal/testutil/realpkg"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// TestNewToolsOverEveryTransport calls the quality, envs and roadmap tools
// with a real go-sdk client over the three ways a client reaches pyexec:
// `pyexec mcp` over stdio, `pyexec serve`'s Streamable HTTP /mcp, and `pyexec
// mcp --executor URL` delegating to `pyexec serve`. ruff comes from the
// package registry (through the machine's shared test uv cache); the
// environment's package is a hermetic wheel found through --find-links.
func TestNewToolsOverEveryTransport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and installs ruff")
	}
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	realpkg.UseSharedCache(t) // inherited by the servers
	whl := wheels.Dir(t)
	t.Setenv("PYEXEC_FIND_LINKS", whl)
	t.Setenv("PYEXEC_TOOLSETS", "all") // pyexec serve's /mcp offers the compat tools too

	ws := t.TempDir()
	_, url, _ := startServe(t, ws, t.TempDir())
	clients := map[string]*mcp.ClientSession{
		"stdio":  mcptest.Command(t, asCLI("mcp", "--toolsets", "all", "--workspace", t.TempDir(), "--state-dir", t.TempDir(), "--log-level", "warn")),
		"remote": mcptest.Command(t, withEnv(asCLI("mcp", "--toolsets", "all", "--executor", url, "--state-dir", t.TempDir(), "--log-level", "warn"), "PYEXEC_TOKEN="+testToken)),
	}
	hc := &http.Client{Transport: bearer{testToken}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	clients["http"] = cs

	for _, name := range []string{"stdio", "http", "remote"} {
		t.Run(name, func(t *testing.T) { exerciseNewTools(t, clients[name], name) })
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func exerciseNewTools(t *testing.T, cs *mcp.ClientSession, mode string) {
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		out, text, isErr := mcptest.Call(t, cs, tool, args)
		if isErr {
			t.Fatalf("%s: %s", tool, text)
		}
		return out
	}
	env := "e2e-" + mode // the http and remote clients share one server

	// Named environments.
	out := call("env_create", map[string]any{"name": env, "dependencies": []string{"pyexec-alpha==1.0"}})
	if !strings.Contains(fmt.Sprint(out["names"]), env) || out["pinned"] != true || !strings.Contains(fmt.Sprint(out["resolved_dependencies"]), "pyexec-alpha==1.0") {
		t.Fatalf("env_create: %v", out)
	}
	out = call("run_python", map[string]any{"code": "import pyexec_alpha; print(pyexec_alpha.__version__)", "env": env})
	if out["stdout"] != "1.0\n" || out["execution_strategy"] != "uv-env" {
		t.Fatalf("run_python in %s: %v", env, out)
	}
	out = call("benchmark_python", map[string]any{"code": "import pyexec_alpha", "env": env, "repeat": 2})
	if len(out["runs"].([]any)) != 2 {
		t.Errorf("benchmark_python in %s: %v", env, out)
	}
	if _, text, isErr := mcptest.Call(t, cs, "run_python", map[string]any{"code": "1", "env": env, "dependencies": []string{"x"}}); !isErr || !strings.Contains(text, "dependencies") {
		t.Errorf("env with dependencies: %q", text)
	}
	if !strings.Contains(fmt.Sprint(call("env_list", nil)["envs"]), env) {
		t.Errorf("env_list lacks %s", env)
	}
	if out = call("env_delete", map[string]any{"name": env}); out["removed"] != true {
		t.Errorf("env_delete: %v", out)
	}
	if _, text, isErr := mcptest.Call(t, cs, "run_python", map[string]any{"code": "1", "env": env}); !isErr || !strings.Contains(text, "no environment is named") {
		t.Errorf("run in a deleted env: %q", text)
	}

	// Code quality with the real ruff.
	out = call("format_code", map[string]any{"code": "x = {  'a':1 }\n"})
	if out["formatted"] != "x = {\"a\": 1}\n" || !strings.Contains(fmt.Sprint(out["diff"]), "+x = {\"a\": 1}") {
		t.Errorf("format_code: %v", out)
	}
	out = call("lint_code", map[string]any{"code": "import os\neval(input())\n", "select": []string{"S", "F"}})
	if !strings.Contains(fmt.Sprint(out["diagnostics"]), "S307") || !strings.Contains(fmt.Sprint(out["diagnostics"]), "F401") {
		t.Errorf("lint_code: %v", out)
	}

	// The roadmap tools.
	out = call("run_script_profile", map[string]any{"script_content": "def hot():\n    return sum(range(10**5))\nhot()\nprint('ok')"})
	if out["stdout"] != "ok\n" || !strings.Contains(fmt.Sprint(out["profile"]), "hot") {
		t.Errorf("run_script_profile: %v", out)
	}
	out = call("run_python", map[string]any{"code": "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)", "mode": "async"})
	id := out["job_id"].(string)
	var got strings.Builder
	cursor := ""
	deadline := time.Now().Add(30 * time.Second)
	for {
		d := call("stream_deltas", map[string]any{"job_id": id, "cursor": cursor, "wait": 5})
		got.WriteString(fmt.Sprint(d["stdout"]))
		cursor = d["cursor"].(string)
		if d["done"] == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream_deltas never done: %v", d)
		}
	}
	if got.String() != "0\n1\n2\n" {
		t.Errorf("stream_deltas gave %q", got.String())
	}
	if out = call("job_cleanup", nil); out["removed_jobs"].(float64) < 1 {
		t.Errorf("job_cleanup: %v", out)
	}
	// And one of the seed's real names.
	out = call("py_run_script_with_dependencies", map[string]any{"script_content": "import sys\nprint(sys.version_info[:2] >= (3, 8))", "dependencies": []string{"pyexec-alpha"}})
	if out["stdout"] != "True\n" || !strings.Contains(fmt.Sprint(out["resolved_dependencies"]), "pyexec-alpha") {
		t.Errorf("py_run_script_with_dependencies: %v", out)
	}
}

func withEnv(cmd *exec.Cmd, env ...string) *exec.Cmd {
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

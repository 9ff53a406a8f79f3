package seedcompat

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/testutil/mcptest"
)

// TestSeedUVExecTwoServers runs the uv-exec-mcp README the way it is set
// up there: the execution server started in the scripts directory (which
// becomes its working directory), an MCP front end reaching it through
// EXECUTION_SERVER_URL, the seed's tools called through the front end, and
// the README's curl examples against the execution server.
func TestSeedUVExecTwoServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts pyexec serve and pyexec mcp subprocesses")
	}
	dir := t.TempDir()
	if p, err := filepath.EvalSymlinks(dir); err == nil {
		dir = p
	}
	mcptest.WriteFile(t, filepath.Join(dir, "hello.py"), `print("Hello from UV HTTP MCP!")`+"\n")
	mcptest.WriteFile(t, filepath.Join(dir, "time_test.py"), `print("Current time:", __import__("datetime").datetime.now())`+"\n")

	// Terminal 1: cd my_python_scripts && <start the execution server>.
	state := t.TempDir()
	serve := exec.Command(os.Args[0], "serve", "--listen", "127.0.0.1:0", "--state-dir", state)
	serve.Dir = dir
	serve.Env = append(os.Environ(), asCLI+"=1")
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	sc := bufio.NewScanner(stderr)
	url := ""
	for url == "" && sc.Scan() {
		if m := regexp.MustCompile(`^\[READY\] .* on (http://[0-9.:]+) `).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatal("the execution server printed no [READY] line")
	}
	go func() {
		for sc.Scan() {
		}
	}()

	// The server generated its bearer token into its state dir (pyexec
	// answers nothing but /health without one; the seed had no auth).
	tokenFile := filepath.Join(state, "server-token")
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatalf("the execution server wrote no token file: %v", err)
	}
	bearer := "Bearer " + strings.TrimSpace(string(token))

	// Terminal 2: the MCP client, from anywhere, configured by environment.
	// Its own state dir differs from the server's, so it is told where the
	// token file is.
	frontState := t.TempDir()
	front := exec.Command(os.Args[0], "mcp", "--toolsets", "all", "--state-dir", frontState, "--log-level", "warn")
	front.Dir = t.TempDir()
	front.Env = append(os.Environ(), asCLI+"=1", "EXECUTION_SERVER_URL="+url, "MCP_HTTP_TIMEOUT=10", "PYEXEC_TOKEN_FILE="+tokenFile)
	cs := mcptest.Command(t, front)

	out, text, isErr := mcptest.Call(t, cs, "execute_python_script", map[string]any{"script_path": "hello.py"})
	if isErr || out["stdout"] != "Hello from UV HTTP MCP!\n" || out["working_directory"] != dir {
		t.Errorf("Execute the hello.py script: %v %q", out, text)
	}
	out, _, _ = mcptest.Call(t, cs, "execute_python_script", map[string]any{"script_path": "time_test.py", "timeout": 10})
	if !strings.HasPrefix(out["stdout"].(string), "Current time: ") {
		t.Errorf("Run time_test.py: %v", out)
	}
	out, text, _ = mcptest.Call(t, cs, "check_execution_server", nil)
	if out["status"] != "healthy" || out["mode"] != "remote" || out["server_url"] != url || out["working_directory"] != dir {
		t.Errorf("Check if the execution server is running: %v %q", out, text)
	}
	out, _, _ = mcptest.Call(t, cs, "get_http_server_info", nil)
	if out["mode"] != "remote" || out["transport"] != "HTTP" || out["server_url"] != url || out["working_directory"] != dir {
		t.Errorf("get_http_server_info: %v", out)
	}
	for _, tool := range []string{"test_hello_world_http", "test_minimal_http"} {
		if out, text, isErr := mcptest.Call(t, cs, tool, nil); isErr || out["exit_code"] != float64(0) {
			t.Errorf("%s: %v %q", tool, out, text)
		}
	}
	if _, text, isErr := mcptest.Call(t, cs, "execute_python_script", map[string]any{"script_path": "../escape.py"}); !isErr || !strings.Contains(text, "outside") {
		t.Errorf("path traversal through the execution server: %q", text)
	}

	// curl -X POST http://127.0.0.1:8080/execute -d '{"script_path": "hello.py", "timeout": 10}'
	// answers 401 without the token, and runs with it.
	resp, err := http.Post(url+"/execute", "application/json", strings.NewReader(`{"script_path": "hello.py", "timeout": 10}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /execute without the token: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", url+"/execute", strings.NewReader(`{"script_path": "hello.py", "timeout": 10}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", bearer)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var exe map[string]any
	json.NewDecoder(resp.Body).Decode(&exe)
	resp.Body.Close()
	if resp.StatusCode != 200 || exe["stdout"] != "Hello from UV HTTP MCP!\n" {
		t.Errorf("POST /execute: %d %v", resp.StatusCode, exe)
	}
	// curl http://127.0.0.1:8080/health
	if resp, err := http.Get(url + "/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /health: %v %v", resp, err)
	}

	// A script saved through the front end is kept, and runs, on the
	// execution server: one state, the server's.
	if _, text, isErr := mcptest.Call(t, cs, "save_script", map[string]any{"name": "greet", "code": "import os\nprint('saved script ran in', os.getcwd())"}); isErr {
		t.Fatalf("save_script: %q", text)
	}
	if _, err := os.Stat(filepath.Join(state, "scripts", "greet.py")); err != nil {
		t.Errorf("save_script did not save on the execution server: %v", err)
	}
	if _, err := os.Stat(filepath.Join(frontState, "scripts")); err == nil {
		t.Errorf("the front end keeps a script store of its own")
	}
	if out, _, _ := mcptest.Call(t, cs, "run_python", map[string]any{"script_name": "greet"}); out["stdout"] != "saved script ran in "+dir+"\n" {
		t.Errorf("run_python script_name through the execution server: %v", out)
	}
	if out, _, _ := mcptest.Call(t, cs, "list_scripts", nil); out["count"] != 1.0 {
		t.Errorf("list_scripts through the execution server: %v", out)
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/testutil/mounts"
)

// testToken is the execution server's token in these tests.
const testToken = "s3cret-s3cret-s3cret"

func asCLI(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PYEXEC_TEST_AS_CLI=1")
	return cmd
}

// TestTwoServers is the uv-exec-mcp seed's setup, end to end: `pyexec
// serve` started in a scripts directory (which becomes its working
// directory), and a stdio MCP client running `pyexec mcp --executor URL`
// (configured through the seed's EXECUTION_SERVER_URL) that runs hello.py
// from that directory. The same server answers the seed's /execute and
// /health; SIGTERM stops it cleanly.
func TestTwoServers(t *testing.T) {
	scripts := t.TempDir()
	if p, err := filepath.EvalSymlinks(scripts); err == nil {
		scripts = p
	}
	if err := os.WriteFile(filepath.Join(scripts, "hello.py"), []byte("print(\"Hello from UV HTTP MCP!\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()

	serve, url, lines := startServe(t, scripts, state)
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "[START] ") || lines[1] != "[DIR] Working directory: "+scripts {
		t.Fatalf("startup lines %q", lines)
	}

	// The MCP front end, configured the seed's way.
	mcpCmd := asCLI("mcp")
	mcpCmd.Env = append(mcpCmd.Env, "EXECUTION_SERVER_URL="+url, "PYEXEC_TOKEN="+testToken, "MCP_HTTP_TIMEOUT=5")
	mcpCmd.Dir = t.TempDir() // where the MCP side starts does not matter
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: mcpCmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"script_path": "hello.py"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(out), `"stdout":"Hello from UV HTTP MCP!\n"`) {
		t.Fatalf("run_python hello.py: %s %v", out, res.Content)
	}

	// The seed's HTTP API on the same listener.
	req, _ := http.NewRequest("POST", url+"/execute", strings.NewReader(`{"script_path": "hello.py", "timeout": 10}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var exe map[string]any
	json.NewDecoder(resp.Body).Decode(&exe)
	resp.Body.Close()
	if resp.StatusCode != 200 || exe["stdout"] != "Hello from UV HTTP MCP!\n" || exe["working_directory"] != scripts {
		t.Fatalf("/execute: %d %v", resp.StatusCode, exe)
	}
	if resp, err := http.Get(url + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health: %v %v", resp, err)
	}

	// A background job running at SIGTERM is recorded as failed, with its
	// output kept: a restarted server (same state dir) reports it so.
	id := startJob(t, url, "import sys, time\nsys.stdout.write(\"working\\n\")\nsys.stdout.flush()\ntime.sleep(60)")
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := serve.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	serve, url, _ = startServe(t, scripts, state)
	var job map[string]any
	getJSON(t, url+"/v1/jobs/"+id, &job)
	var chunk map[string]any
	getJSON(t, url+"/v1/jobs/"+id+"/output", &chunk)
	if job["status"] != "failed" || !strings.Contains(fmt.Sprint(job["error"]), "shut down") || chunk["stdout"] != "working\n" {
		t.Fatalf("job after shutdown: %v, output %v", job, chunk)
	}
	serve.Process.Signal(syscall.SIGTERM)
	serve.Wait()
}

// startServe starts `pyexec serve` in dir on a free port and returns it,
// its URL and its first stderr lines (up to [READY]).
func startServe(t *testing.T, dir, state string) (*exec.Cmd, string, []string) {
	t.Helper()
	serve := asCLI("serve", "--listen", "127.0.0.1:0", "--state-dir", state)
	serve.Dir = dir
	serve.Env = append(serve.Env, "PYEXEC_TOKEN="+testToken)
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed, the server leaves its temp dirs' tmpfs to its unmount
	// watcher: wait for it before the state dir is removed.
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait(); mounts.WaitGone(t, state) })
	sc := bufio.NewScanner(stderr)
	var lines []string
	url := ""
	for url == "" && sc.Scan() {
		lines = append(lines, sc.Text())
		if m := regexp.MustCompile(`^\[READY\] .* on (http://[0-9.:]+) `).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("no [READY] line: %q", lines)
	}
	go func() { // keep draining the server's log
		for sc.Scan() {
		}
	}()
	return serve, url, lines
}

func authed(method, url, body string) *http.Request {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(authed("GET", url, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
}

// startJob starts a background job and returns its id once it has printed
// its first line (so it is surely running).
func startJob(t *testing.T, url, code string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"code": code, "timeout": 120})
	resp, err := http.DefaultClient.Do(authed("POST", url+"/v1/jobs", string(body)))
	if err != nil {
		t.Fatal(err)
	}
	var job map[string]any
	json.NewDecoder(resp.Body).Decode(&job)
	resp.Body.Close()
	id, _ := job["job_id"].(string)
	if resp.StatusCode != 202 || id == "" {
		t.Fatalf("start job: %d %v", resp.StatusCode, job)
	}
	var chunk map[string]any
	getJSON(t, url+"/v1/jobs/"+id+"/output?wait=30", &chunk)
	if chunk["stdout"] != "working\n" {
		t.Fatalf("job output %v", chunk)
	}
	return id
}

// TestMCPExecutorDown: with the execution server down, `pyexec mcp
// --executor` still starts (like the seed's client) and each tool call says
// clearly that the server cannot be reached.
func TestMCPExecutorDown(t *testing.T) {
	mcpCmd := asCLI("mcp", "--executor", "http://127.0.0.1:1")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: mcpCmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "print(1)"}})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if !res.IsError || !strings.Contains(text, "cannot reach execution server at http://127.0.0.1:1") {
		t.Fatalf("isError=%v %q", res.IsError, text)
	}
}

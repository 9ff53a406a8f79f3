package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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

	serve := asCLI("serve", "--listen", "127.0.0.1:0", "--state-dir", state)
	serve.Dir = scripts
	serve.Env = append(serve.Env, "PYEXEC_TOKEN=s3cret")
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Process.Kill()
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
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "[START] ") || lines[1] != "[DIR] Working directory: "+scripts {
		t.Fatalf("startup lines %q", lines)
	}

	// The MCP front end, configured the seed's way.
	mcpCmd := asCLI("mcp")
	mcpCmd.Env = append(mcpCmd.Env, "EXECUTION_SERVER_URL="+url, "PYEXEC_TOKEN=s3cret", "MCP_HTTP_TIMEOUT=5")
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
	req.Header.Set("Authorization", "Bearer s3cret")
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

	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := serve.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
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

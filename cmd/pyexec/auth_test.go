package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeAuthByDefault: `pyexec serve` with default flags answers nothing
// but /health without credentials. It generates a token into its state dir
// (0600, never printed, never on a command line); `pyexec mcp --executor`
// with the same state dir finds it; and a run, which can reach the server
// over loopback under the default policy, can neither read the token nor
// use the API.
func TestServeAuthByDefault(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	serve := asCLI("serve", "--listen", "127.0.0.1:0", "--workspace", ws, "--state-dir", state)
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	sc := bufio.NewScanner(stderr)
	var url, authLine string
	for url == "" && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "[AUTH] ") {
			authLine = sc.Text()
		}
		if m := regexp.MustCompile(`^\[READY\] .* on (http://[0-9.:]+) `).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	go io.Copy(io.Discard, stderr)
	if url == "" {
		t.Fatal("no [READY] line")
	}

	tokenFile := filepath.Join(state, "server-token")
	st, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatalf("no generated token file: %v", err)
	}
	data, _ := os.ReadFile(tokenFile)
	token := strings.TrimSpace(string(data))
	if st.Mode().Perm() != 0o600 || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(token) {
		t.Fatalf("token file mode %v, token %q", st.Mode(), token)
	}
	if !strings.Contains(authLine, tokenFile) || strings.Contains(authLine, token) {
		t.Fatalf("[AUTH] line should name the file, never the token: %q", authLine)
	}

	// Every route but /health refuses a request without the token.
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	resp := send(t, "GET", url+"/openapi.json", "", token)
	json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if len(doc.Paths) < 8 {
		t.Fatalf("openapi paths: %v", doc.Paths)
	}
	routes := map[string]string{"POST /mcp": "{}", "GET /mcp": "", "GET /nope": "", "POST /execute": `{"script_path":"x.py"}`}
	for path, ops := range doc.Paths {
		for method := range ops {
			p := strings.NewReplacer("{id}", "abc", "{name}", "abc").Replace(path)
			routes[strings.ToUpper(method)+" "+p] = "{}"
		}
	}
	for route, body := range routes {
		method, path, _ := strings.Cut(route, " ")
		for _, auth := range []string{"", "wrong-token-wrong-token"} {
			resp := send(t, method, url+path, body, auth)
			resp.Body.Close()
			if path == "/health" {
				if resp.StatusCode != 200 {
					t.Errorf("%s: %d", route, resp.StatusCode)
				}
				continue
			}
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with token %q: %d, want 401", route, auth, resp.StatusCode)
			}
		}
	}
	var h map[string]any
	resp = send(t, "GET", url+"/health", "", "")
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if h["status"] != "healthy" || h["working_directory"] != nil {
		t.Fatalf("/health without the token: %v", h)
	}

	// The MCP front end on this machine, same state dir: no token given.
	front := asCLI("mcp", "--executor", url, "--state-dir", state, "--log-level", "warn")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: front}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	// A run tries every way to the token and to the API it knows of.
	probe := fmt.Sprintf(`import os, urllib.request, urllib.error
def attempt(name, f):
    try:
        print(name, "GOT", f())
    except Exception as e:
        print(name, "refused", type(e).__name__)
attempt("token-file", lambda: open(%q).read())
attempt("state-dir", lambda: os.listdir(%q))
def api():
    try:
        return urllib.request.urlopen(%q + "/v1/jobs", timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code
print("api", api())
attempt("cmdline", lambda: open("/proc/%d/cmdline", "rb").read())
attempt("environ", lambda: open("/proc/%d/environ", "rb").read())
`, tokenFile, state, url, serve.Process.Pid, serve.Process.Pid)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": probe}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res.StructuredContent)
	var r struct {
		Stdout string `json:"stdout"`
	}
	json.Unmarshal(out, &r)
	if res.IsError || r.Stdout == "" {
		t.Fatalf("probe through pyexec mcp --executor (token found in the state dir): %s %v", out, res.Content)
	}
	if strings.Contains(r.Stdout, token) || !strings.Contains(r.Stdout, "token-file refused") || !strings.Contains(r.Stdout, "api 401") {
		t.Fatalf("a run reached the token or the API:\n%s", r.Stdout)
	}
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		t.Log(l[:min(len(l), 120)])
	}
}

func send(t *testing.T, method, url, body, token string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestTokenNeverOnTheCommandLine: --token is refused with what to use
// instead.
func TestTokenNeverOnTheCommandLine(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--token", "s3cret-s3cret-s3cret"},
		{"serve", "-token=s3cret-s3cret-s3cret"},
		{"mcp", "--executor", "http://127.0.0.1:1", "--token", "x"},
	} {
		var stderr bytes.Buffer
		cmd := asCLI(args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), "--token-file") || !strings.Contains(stderr.String(), "/proc/PID/cmdline") {
			t.Errorf("%v: exit %d (%v) %q", args, code, err, stderr.String())
		}
	}
}

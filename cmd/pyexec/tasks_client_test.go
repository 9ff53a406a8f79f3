package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// requireTasksClient makes a missing Node.js or SDK a failure instead of a
// skip (CI sets it: .ci/run installs both).
const requireTasksClient = "PYEXEC_REQUIRE_TASKS_CLIENT"

// TestTasksWithTypeScriptClient runs MCP Tasks end to end with the official
// TypeScript SDK's experimental task client (testdata/tasks-client), over
// stdio (`pyexec mcp`), Streamable HTTP (`pyexec serve`'s /mcp) and the
// two-server layout (`pyexec mcp --executor`): a 30-second job run as a
// task, polled, its result fetched; another task cancelled and its process
// tree checked gone. The three run side by side (each is mostly the 30 s
// job sleeping).
func TestTasksWithTypeScriptClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 30 s job as a task")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "tasks-client"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		msg := "needs Node.js and `npm ci` in " + dir + ": " + err.Error()
		if os.Getenv(requireTasksClient) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	self := func(args ...string) string {
		b, _ := json.Marshal(append([]string{os.Args[0]}, args...))
		return string(b)
	}
	// Side by side in goroutines, not parallel subtests: -parallel is
	// GOMAXPROCS (2 here), and the three are mostly the job sleeping.
	_, httpURL, _ := startServe(t, t.TempDir(), t.TempDir())
	_, remoteURL, _ := startServe(t, t.TempDir(), t.TempDir())
	modes := map[string][]string{
		"stdio":  {"PYEXEC_MCP_COMMAND=" + self("mcp", "--workspace", t.TempDir(), "--state-dir", t.TempDir(), "--log-level", "warn")},
		"http":   {"PYEXEC_MCP_URL=" + httpURL + "/mcp", "PYEXEC_TOKEN=" + testToken},
		"remote": {"PYEXEC_MCP_COMMAND=" + self("mcp", "--executor", remoteURL, "--state-dir", t.TempDir(), "--log-level", "warn"), "PYEXEC_TOKEN=" + testToken},
	}
	var wg sync.WaitGroup
	results := make(map[string][]string, len(modes))
	var mu sync.Mutex
	for mode, env := range modes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			problems := runTasksClient(node, dir, env...)
			mu.Lock()
			results[mode] = problems
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, mode := range []string{"stdio", "http", "remote"} {
		for _, p := range results[mode] {
			t.Errorf("%s: %s", mode, p)
		}
	}
}

// runTasksClient runs the client with env and returns what went wrong.
func runTasksClient(node, dir string, env ...string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PYEXEC_TEST_AS_CLI=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var report struct {
		Passed, Failed int
		Checks         []struct {
			Name   string
			OK     bool
			Detail any
		}
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(line, "{") {
			json.Unmarshal([]byte(line), &report)
		}
	}
	var problems []string
	for _, c := range report.Checks {
		if !c.OK {
			problems = append(problems, fmt.Sprintf("%s: %v", c.Name, c.Detail))
		}
	}
	if err != nil || report.Passed < 20 || report.Failed > 0 {
		problems = append(problems, fmt.Sprintf("tasks client: %v, %d passed, %d failed\nstderr:\n%s", err, report.Passed, report.Failed, tailString(stderr.String(), 3000)))
	}
	return problems
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

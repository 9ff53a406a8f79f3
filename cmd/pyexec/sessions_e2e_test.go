package main

import (
	"context"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/testutil/mcptest"
	"github.com/pyexec/pyexec/internal/testutil/mounts"
	"github.com/pyexec/pyexec/internal/testutil/proc"
)

func mustCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t.Helper()
	out, text, isErr := mcptest.Call(t, cs, tool, args)
	if isErr {
		t.Fatalf("%s: %s", tool, text)
	}
	return out
}

// TestSessionsOverStdioSurviveNothing: sessions through `pyexec mcp` as a
// subprocess; a SIGKILL of the server takes every session and what its
// cells started with it, and the restarted server lists them as lost.
func TestSessionsOverStdioSurviveNothing(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	mounts.CleanupWaitsFor(t, state) // the killed server's tmpfs goes with its unmount watcher
	start := func() (*mcp.ClientSession, *os.Process) {
		cmd := asCLI("mcp", "--workspace", ws, "--state-dir", state, "--log-level", "warn")
		cs := mcptest.Command(t, cmd)
		return cs, cmd.Process
	}
	cs, server := start()
	mark := proc.Mark(t)
	out := mustCall(t, cs, "run_python", map[string]any{"session": "keep", "code": proc.Sleeper(mark) + "x = 1"})
	if out["session_created"] != true {
		t.Fatalf("first cell: %v", out)
	}
	if out = mustCall(t, cs, "run_python", map[string]any{"session": "keep", "code": "x + 1"}); out["result"] != "2" {
		t.Fatalf("second cell: %v", out)
	}
	if out = mustCall(t, cs, "run_python", map[string]any{"code": "print('x' in globals())"}); out["stdout"] != "False\n" {
		t.Fatalf("a plain run shares nothing: %v", out)
	}
	if len(proc.Marked(mark)) == 0 {
		t.Fatal("the cell's child is not running")
	}
	if err := server.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Reaped, the server has let go of its owner lock: its session
	// processes may die first (they go with the thread that started
	// them), and a server started before that would take the killed one
	// for alive and leave its sessions alone. The transport may reap it
	// first; either way it is gone.
	_, _ = server.Wait()
	proc.WaitGone(t, mark, 15*time.Second)

	cs, _ = start()
	list := mustCall(t, cs, "session_list", map[string]any{})
	l, _ := list["sessions"].([]any)
	if len(l) != 1 || l[0].(map[string]any)["status"] != "lost" || l[0].(map[string]any)["lost_reason"] != "server_restarted" {
		t.Fatalf("after restart: %v", list)
	}
	_, text, isErr := mcptest.Call(t, cs, "run_python", map[string]any{"session": "keep", "code": "x"})
	if !isErr || !strings.Contains(text, `session "keep" was lost (server_restarted)`) {
		t.Fatalf("first call after restart: %q", text)
	}
	if out = mustCall(t, cs, "run_python", map[string]any{"session": "keep", "code": "'x' in globals()"}); out["session_created"] != true || out["result"] != "False" {
		t.Fatalf("then a new session: %v", out)
	}
}

// TestSessionsRemote: `pyexec mcp --executor URL` keeps its sessions on
// `pyexec serve`, where `pyexec sessions list|close` sees them.
func TestSessionsRemote(t *testing.T) {
	ws := t.TempDir()
	_, url, _ := startServe(t, ws, t.TempDir())
	cs := mcptest.Command(t, withEnv(asCLI("mcp", "--executor", url, "--state-dir", t.TempDir(), "--log-level", "warn"), "PYEXEC_TOKEN="+testToken))
	mustCall(t, cs, "session_create", map[string]any{"session": "far", "label": "remote one"})
	if out := mustCall(t, cs, "run_python", map[string]any{"session": "far", "code": "import os\nos.getcwd()"}); out["result"] != strconvQuote(ws) {
		t.Fatalf("cell: %v", out)
	}
	cli := withEnv(asCLI("sessions", "--server", url, "list"), "PYEXEC_TOKEN="+testToken)
	b, err := cli.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "far") || !strings.Contains(string(b), "remote one") {
		t.Fatalf("pyexec sessions list: %v\n%s", err, b)
	}
	cli = withEnv(asCLI("sessions", "--server", url, "close", "far"), "PYEXEC_TOKEN="+testToken)
	if b, err = cli.CombinedOutput(); err != nil || !strings.Contains(string(b), "closed far after 1 cells") {
		t.Fatalf("pyexec sessions close: %v\n%s", err, b)
	}
	if _, text, isErr := mcptest.Call(t, cs, "session_interrupt", map[string]any{"session": "far"}); !isErr || !strings.Contains(text, `no session named "far"`) {
		t.Fatalf("after close: %q", text)
	}
}

// TestSessionsOverStreamableHTTP: `pyexec serve`'s /mcp offers the same
// sessions (a go-sdk client over Streamable HTTP).
func TestSessionsOverStreamableHTTP(t *testing.T) {
	_, url, _ := startServe(t, t.TempDir(), t.TempDir())
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer{testToken}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if out := mustCall(t, cs, "run_python", map[string]any{"session": "web", "code": "acc = [1]"}); out["session_created"] != true {
		t.Fatalf("first cell: %v", out)
	}
	if out := mustCall(t, cs, "run_python", map[string]any{"session": "web", "code": "acc.append(2); acc"}); out["result"] != "[1, 2]" || out["execution_count"] != 2.0 {
		t.Fatalf("second cell: %v", out)
	}
	if out := mustCall(t, cs, "session_close", map[string]any{"session": "web"}); out["status"] != "closed" {
		t.Fatalf("close: %v", out)
	}
}

func strconvQuote(s string) string { return "'" + s + "'" }

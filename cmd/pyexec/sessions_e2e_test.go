package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/testutil/mcptest"
)

// processesWith lists the pids whose command line holds marker.
func processesWith(marker string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			if pid, err := strconv.Atoi(filepath.Base(d)); err == nil && pidAlive(pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

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
	start := func() (*mcp.ClientSession, *os.Process) {
		cmd := asCLI("mcp", "--workspace", ws, "--state-dir", state, "--log-level", "warn")
		cs := mcptest.Command(t, cmd)
		return cs, cmd.Process
	}
	cs, proc := start()
	out := mustCall(t, cs, "run_python", map[string]any{"session": "keep", "code": "import subprocess\nd = subprocess.Popen(['sleep', '876.5'], start_new_session=True)\nx = 1"})
	if out["session_created"] != true {
		t.Fatalf("first cell: %v", out)
	}
	if out = mustCall(t, cs, "run_python", map[string]any{"session": "keep", "code": "x + 1"}); out["result"] != "2" {
		t.Fatalf("second cell: %v", out)
	}
	if out = mustCall(t, cs, "run_python", map[string]any{"code": "print('x' in globals())"}); out["stdout"] != "False\n" {
		t.Fatalf("a plain run shares nothing: %v", out)
	}
	daemons := processesWith("876.5")
	if len(daemons) == 0 {
		t.Fatal("the cell's daemon is not running")
	}
	if err := proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, daemons...)

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

func strconvQuote(s string) string { return "'" + s + "'" }

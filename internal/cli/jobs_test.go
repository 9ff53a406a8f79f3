package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/pyexec/pyexec/internal/testutil/mounts"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func mcpServer(t *testing.T, workspace, stateDir string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "mcp", "--log-level", "error")
	mounts.CleanupWaitsFor(t, stateDir)
	cmd.Env = append(os.Environ(), "PYEXEC_TEST_AS_CLI=1", "PYEXEC_WORKSPACE="+workspace, "PYEXEC_STATE_DIR="+stateDir)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, cmd
}

func callJSON(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error %+v", name, res.Content)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

// A server killed with SIGKILL mid-job: its run dies with it (the launcher's
// parent-death signal), and the restarted server reports the job failed with
// the output it had printed.
func TestMCPJobAfterServerSIGKILL(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	cs, cmd := mcpServer(t, ws, state)
	// A run's pids are those of its own PID namespace: its child is found
	// by a mark in its command line.
	mark := fmt.Sprintf("pyexec-mark-%d-job-sigkill", os.Getpid())
	code := fmt.Sprintf("import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', %q])\nprint('before the crash', flush=True)\ntime.sleep(600)", mark)
	start := callJSON(t, cs, "run_python", map[string]any{"code": code, "mode": "async", "job_label": "doomed"})
	id, _ := start["job_id"].(string)
	if id == "" {
		t.Fatalf("no job id: %v", start)
	}
	printed := ""
	for !strings.HasSuffix(printed, "\n") { // print may arrive in two writes
		got := callJSON(t, cs, "get_job", map[string]any{"job_id": id, "stdout_offset": len(printed), "wait": 30})
		if got["status"] != "running" {
			t.Fatalf("get_job before the crash: %v", got)
		}
		printed += got["stdout"].(string)
	}
	if len(markedProcesses(mark)) != 1 {
		t.Fatalf("the run's child is not running: %v", markedProcesses(mark))
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	deadline := time.Now().Add(15 * time.Second)
	for len(markedProcesses(mark)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the run's processes %v outlived their SIGKILLed server", markedProcesses(mark))
		}
		time.Sleep(10 * time.Millisecond)
	}

	cs2, _ := mcpServer(t, ws, state)
	defer cs2.Close()
	got := callJSON(t, cs2, "get_job", map[string]any{"job_id": id})
	if got["status"] != "failed" || !strings.Contains(fmt.Sprint(got["error"]), "server restarted") || got["stdout"] != "before the crash\n" {
		t.Fatalf("after restart: %v", got)
	}
}

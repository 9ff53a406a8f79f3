package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/pyexec/pyexec/internal/testutil/proc"
	"os"
	"os/exec"
	"path/filepath"
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
	pidFile := filepath.Join(ws, "pid")
	code := fmt.Sprintf("import os, time\nopen(%q, 'w').write(str(os.getpid()))\nprint('before the crash', flush=True)\ntime.sleep(600)", pidFile)
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
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(data), &pid)

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	deadline := time.Now().Add(15 * time.Second)
	for !proc.Gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("python %d outlived its SIGKILLed server", pid)
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

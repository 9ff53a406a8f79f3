package httpapi_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A long cell is job-backed like run_python: after the sync budget the call
// returns the output so far and a job id, the session stays busy (a call
// on it is refused at once, naming the cell, its elapsed time and the job),
// get_job reads the rest, including the cell's value; then the session is
// idle with its namespace. mode async starts a cell as a job at once.
func testSessionLongCell(t *testing.T, cs *mcp.ClientSession, workspace, tag string) {
	ctx := context.Background()
	call := func(tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var s map[string]any
		data, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(data, &s)
		return r, s
	}
	name := "long-" + tag
	mark := "go-" + tag + ".mark"
	wantOK(t, first(call("session_create", map[string]any{"session": name})))
	r, s := call("run_python", map[string]any{"session": name, "timeout": 300, "code": "import os, time\nprint('started', flush=True)\n" +
		"while not os.path.exists(" + quotePy(mark) + "): time.sleep(0.01)\nprint('finished')\nkept = 5\nkept * 2"})
	wantOK(t, r)
	id, _ := s["job_id"].(string)
	if id == "" || s["session_status"] != "busy" || !strings.Contains(s["stdout"].(string), "started") {
		t.Fatalf("a cell past the sync budget: %v\n%s", s, text(r))
	}
	r, _ = call("run_python", map[string]any{"session": name, "code": "1"})
	if msg := text(r); !r.IsError || !strings.Contains(msg, "is busy running cell 1 as job "+id) || !strings.Contains(msg, "s;") {
		t.Fatalf("a call on the busy session: %s", msg)
	}
	_, l := call("session_list", map[string]any{})
	found := false
	for _, x := range l["sessions"].([]any) {
		if in := x.(map[string]any); in["session"] == name {
			found = in["status"] == "busy" && in["running_job_id"] == id
		}
	}
	if !found {
		t.Fatalf("session_list while the job runs: %v", l)
	}
	if err := os.WriteFile(filepath.Join(workspace, mark), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, call, id)
	if out := j["stdout"].(string); !strings.Contains(out, "started\nfinished\nOut[1]: 10\n") || j["status"] != "completed" {
		t.Fatalf("the job of the cell: %v", j)
	}
	if _, s := call("run_python", map[string]any{"session": name, "code": "kept"}); s["result"] != "5" || s["execution_count"] != float64(2) {
		t.Fatalf("after the job-backed cell: %v", s)
	}

	r, s = call("run_python", map[string]any{"session": name, "mode": "async", "code": "print('bg')\nkept + 4"})
	wantOK(t, r)
	id, _ = s["job_id"].(string)
	if id == "" {
		t.Fatalf("mode async: %v", s)
	}
	if j := waitJob(t, call, id); j["stdout"] != "bg\nOut[3]: 9\n" {
		t.Fatalf("async cell job: %v", j)
	}
	// An error ends the cell, and the job says so.
	_, s = call("run_python", map[string]any{"session": name, "mode": "async", "code": "1/0"})
	if j := waitJob(t, call, s["job_id"].(string)); j["exit_code"] != float64(1) || !strings.Contains(j["stderr"].(string), "ZeroDivisionError") {
		t.Fatalf("failing async cell: %v", j)
	}
	call("session_close", map[string]any{"session": name})
}

func first(r *mcp.CallToolResult, _ map[string]any) *mcp.CallToolResult { return r }

func quotePy(s string) string { b, _ := json.Marshal(s); return string(b) }

// waitJob long-polls get_job until the job is over and its output read.
func waitJob(t *testing.T, call func(string, map[string]any) (*mcp.CallToolResult, map[string]any), id string) map[string]any {
	t.Helper()
	for i := 0; i < 20; i++ {
		r, j := call("get_job", map[string]any{"job_id": id, "wait": 30})
		if r.IsError {
			t.Fatalf("get_job: %s", text(r))
		}
		if j["output_done"] == true {
			return j
		}
	}
	t.Fatalf("job %s did not finish", id)
	return nil
}

package mcpserver

import (
	"strings"
	"testing"
)

// A task-augmented run_python with session runs the cell as a kept job the
// task names (no handoff: the task is the wait); cancelling the task
// interrupts the cell and keeps the session's namespace.
func TestTaskSessionCell(t *testing.T) {
	c := newRawClient(t, "2025-11-25")
	first := c.mustCall("tools/call", map[string]any{"name": "run_python", "arguments": map[string]any{"session": "tk", "code": "x = 1"}})
	if first["isError"] == true {
		t.Fatalf("first cell: %v", first)
	}
	created := c.mustCall("tools/call", map[string]any{"name": "run_python", "task": map[string]any{},
		"arguments": map[string]any{"session": "tk", "code": "x + 1"}})
	id := created["task"].(map[string]any)["taskId"].(string)
	res := c.mustCall("tasks/result", map[string]any{"taskId": id})
	sc, _ := res["structuredContent"].(map[string]any)
	if sc["result"] != "2" || sc["execution_count"] != float64(2) || sc["job_id"] != nil {
		t.Fatalf("session cell as a task: %v", res)
	}
	got := c.mustCall("tasks/get", map[string]any{"taskId": id})
	job, _ := got["_meta"].(map[string]any)[jobIDMetaKey].(string)
	if got["status"] != "completed" || job == "" {
		t.Fatalf("tasks/get: %v", got)
	}
	if j := c.mustCall("tools/call", map[string]any{"name": "get_job", "arguments": map[string]any{"job_id": job}}); !strings.Contains(j["structuredContent"].(map[string]any)["stdout"].(string), "Out[2]: 2") {
		t.Fatalf("the task's job: %v", j)
	}

	created = c.mustCall("tools/call", map[string]any{"name": "run_python", "task": map[string]any{},
		"arguments": map[string]any{"session": "tk", "code": "import time\nwhile True: time.sleep(0.01)", "timeout": 300}})
	id = created["task"].(map[string]any)["taskId"].(string)
	for {
		g := c.mustCall("tasks/get", map[string]any{"taskId": id})
		if m, _ := g["_meta"].(map[string]any); m != nil && m[jobIDMetaKey] != nil {
			break // the cell's job exists: cancelling reaches it
		}
	}
	for {
		l := c.mustCall("tools/call", map[string]any{"name": "session_list", "arguments": map[string]any{}})
		if s := l["structuredContent"].(map[string]any)["sessions"].([]any); s[0].(map[string]any)["status"] == "busy" {
			break
		}
	}
	if _, err := c.call("tasks/cancel", map[string]any{"taskId": id}); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	after := c.mustCall("tools/call", map[string]any{"name": "run_python", "arguments": map[string]any{"session": "tk", "code": "x"}})
	if sc := after["structuredContent"].(map[string]any); sc["result"] != "1" {
		t.Fatalf("after the cancelled task: %v", after)
	}
}

package seedcompat

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/testutil/mcptest"
)

// The python-executor-mcp README's job examples, each several calls long.

// jobOutput polls get_job_output until the job is finished, as the
// README's loops do.
func jobOutput(t *testing.T, cs *mcp.ClientSession, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, text, isErr := mcptest.Call(t, cs, "get_job_output", map[string]any{"job_id": id})
		if isErr {
			t.Fatalf("get_job_output: %s", text)
		}
		wantFields(t, out, "status", "stdout", "stderr", "exit_code", "elapsed_seconds")
		if out["status"] == "finished" {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %v", id, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jobStream(t *testing.T, cs *mcp.ClientSession, id string) string {
	t.Helper()
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "job-stream://" + id})
	if err != nil || len(rr.Contents) != 1 {
		t.Fatalf("job-stream://%s: %v %v", id, rr, err)
	}
	text := rr.Contents[0].Text
	if !strings.HasPrefix(text, "---STDOUT---\n") || !strings.Contains(text, "---STDERR---\n") {
		t.Errorf("job-stream snapshot format: %q", text)
	}
	return text
}

func startJob(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, fields ...string) string {
	t.Helper()
	out, text, isErr := mcptest.Call(t, cs, tool, args)
	wantFields(t, out, append([]string{"job_id", "status"}, fields...)...)
	id, _ := out["job_id"].(string)
	if isErr || id == "" || out["status"] != "started" {
		t.Fatalf("%s: %v %q", tool, out, text)
	}
	return id
}

// 8.5: start = run_script_in_dir_async(...); snapshot = get_resource(job-stream://...); final = get_job_output(job_id)
func example85(t *testing.T, e *seedEnv) {
	id := startJob(t, e.pymcp, "run_script_in_dir_async", map[string]any{
		"directory": e.rel("/opt/jobs"), "script_path": "long_task.py", "use_uv": true, "python_version": "3.13", "stream": true,
	}, "execution_strategy")
	jobStream(t, e.pymcp, id)
	final := jobOutput(t, e.pymcp, id)
	if final["stdout"] != "step 0\nstep 1\nstep 2\nstep 3\nstep 4\ndone\n" || final["exit_code"] != "0" {
		t.Errorf("final = %v", final)
	}
	if snap := jobStream(t, e.pymcp, id); !strings.HasPrefix(snap, "---STDOUT---\nstep 0\n") {
		t.Errorf("final snapshot = %q", snap)
	}
}

// 8.6: run_script_with_dependencies_async(script_content=..., dependencies=[], stream=True)
func example86(t *testing.T, e *seedEnv) {
	id := startJob(t, e.pymcp, "run_script_with_dependencies_async", map[string]any{
		"script_content": "import time; [print(i) or time.sleep(0.2) for i in range(5)]", "python_version": "3.13", "dependencies": []string{}, "stream": true,
	}, "python_version_used")
	if final := jobOutput(t, e.pymcp, id); final["stdout"] != "0\n1\n2\n3\n4\n" {
		t.Errorf("final = %v", final)
	}
}

// 8.8: a long operation switches to the background; py_job_status shows
// status and progress; after the loop the job has its result.
func example88(t *testing.T, e *seedEnv) {
	cs := e.smart
	out, text, isErr := mcptest.Call(t, cs, "run_script_in_dir", map[string]any{
		"directory": "/tmp", "script_content": "import time, pyexec_progress\nfor i in range(1, 101, 49):\n    pyexec_progress.report(i, 100, 'working')\n    time.sleep(0.8)\nprint('all done')\n",
	})
	id, _ := out["job_id"].(string)
	if isErr || id == "" || out["status"] != "running" || !strings.Contains(out["message"].(string), id) {
		t.Fatalf("no smart-async switch: %v %q", out, text)
	}
	status, _, _ := mcptest.Call(t, cs, "py_job_status", map[string]any{"job_id": id})
	job, _ := status["job"].(map[string]any)
	if job["status"] != "running" {
		t.Errorf("py_job_status while running = %v", status)
	}
	deadline := time.Now().Add(30 * time.Second)
	sawProgress := false
	for job["status"] == "running" || job["status"] == "pending" {
		if p, _ := job["progress"].(map[string]any); p != nil && p["total"] == float64(100) {
			sawProgress = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still running: %v", job)
		}
		time.Sleep(200 * time.Millisecond)
		status, _, _ = mcptest.Call(t, cs, "py_job_status", map[string]any{"job_id": id})
		job, _ = status["job"].(map[string]any)
	}
	result, _ := job["result"].(map[string]any)
	if job["status"] != "completed" || result["stdout"] != "all done\n" || !sawProgress {
		t.Errorf("final job = %v (progress seen: %t)", job, sawProgress)
	}
}

// 8.9 and 4.3: kill_job(job_id=...) stops a running job; list_running_jobs
// shows the seed's string fields; get_job_output has what it printed.
func example89(t *testing.T, e *seedEnv) {
	id := startJob(t, e.pymcp, "run_script_in_dir_async", map[string]any{"directory": "/tmp", "script_content": "import time\nprint('started', flush=True)\ntime.sleep(60)"})
	waitPrinted(t, e.pymcp, id, "started\n")
	out, text, isErr := mcptest.Call(t, e.pymcp, "kill_job", map[string]any{"job_id": id})
	if isErr || out["job_id"] != id || out["status"] != "killed" {
		t.Fatalf("kill_job = %v %q", out, text)
	}
	if _, err := strconv.Atoi(out["exit_code"].(string)); err != nil && out["exit_code"] != "None" {
		t.Errorf("exit_code %q is neither a number nor None", out["exit_code"])
	}
	if final := jobOutput(t, e.pymcp, id); final["stdout"] != "started\n" {
		t.Errorf("output after kill = %v", final)
	}
}

func waitPrinted(t *testing.T, cs *mcp.ClientSession, id, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, _ := mcptest.Call(t, cs, "get_job_output", map[string]any{"job_id": id})
		if out["stdout"] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never printed %q: %v", id, want, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func example43(t *testing.T, e *seedEnv) {
	id := startJob(t, e.pymcp, "run_script_in_dir_async", map[string]any{"directory": "/tmp", "script_content": "import time\nprint('tick', flush=True)\ntime.sleep(60)"})
	waitPrinted(t, e.pymcp, id, "tick\n")
	out, _, _ := mcptest.Call(t, e.pymcp, "list_running_jobs", nil)
	list, _ := out["result"].([]any)
	var entry map[string]any
	for _, x := range list {
		if m := x.(map[string]any); m["job_id"] == id {
			entry = m
		}
	}
	if entry == nil || entry["running"] != "True" || entry["exit_code"] != "None" || entry["pid"] == "" || entry["stdout_chunks"] != "5" {
		t.Errorf("list_running_jobs entry = %v", entry)
	}
	for _, f := range []string{"job_id", "running", "exit_code", "pid", "elapsed_seconds", "stream", "stdout_chunks", "stderr_chunks"} {
		if _, ok := entry[f].(string); !ok {
			t.Errorf("field %s is not a string as in the seed: %v", f, entry[f])
		}
	}
	out, _, _ = mcptest.Call(t, e.pymcp, "get_job_output", map[string]any{"job_id": id})
	if out["status"] != "running" || out["stdout"] != "tick\n" || out["exit_code"] != "None" {
		t.Errorf("get_job_output while running = %v", out)
	}
	if out, _, _ := mcptest.Call(t, e.pymcp, "kill_job", map[string]any{"job_id": id}); out["status"] != "killed" {
		t.Errorf("kill_job = %v", out)
	}
}

// 6.2: py_job_status, py_list_jobs(status_filter, limit), py_cancel_job,
// py_prune_jobs(keep_completed=False, max_age_hours=24).
func example62jobs(t *testing.T, e *seedEnv) {
	id := startJob(t, e.pymcp, "run_script_in_dir_async", map[string]any{"directory": "/tmp", "script_content": "import time\ntime.sleep(60)", "job_label": "abc"})
	out, _, _ := mcptest.Call(t, e.pymcp, "py_job_status", map[string]any{"job_id": id})
	if job, _ := out["job"].(map[string]any); job == nil || (job["status"] != "running" && job["status"] != "pending") {
		t.Errorf("py_job_status = %v", out)
	}
	out, _, _ = mcptest.Call(t, e.pymcp, "py_list_jobs", map[string]any{"status_filter": "running", "limit": 50})
	wantFields(t, out, "jobs", "total")
	out, text, isErr := mcptest.Call(t, e.pymcp, "py_cancel_job", map[string]any{"job_id": id})
	if isErr || out["job_id"] != id || out["status"] != "cancelled" {
		t.Errorf("py_cancel_job = %v %q", out, text)
	}
	out, text, isErr = mcptest.Call(t, e.pymcp, "py_prune_jobs", map[string]any{"keep_completed": false, "max_age_hours": 24})
	wantFields(t, out, "removed", "remaining")
	if isErr {
		t.Errorf("py_prune_jobs: %q", text)
	}
	// The running server's defaults keep failed and cancelled jobs and
	// only look at jobs older than 24 h (shared/seed-servers.md): the
	// cancelled job goes once neither holds.
	out, _, _ = mcptest.Call(t, e.pymcp, "py_prune_jobs", map[string]any{"keep_completed": false, "keep_failed": false, "max_age_hours": 0})
	if out["removed"].(float64) < 1 {
		t.Errorf("py_prune_jobs without an age limit = %v", out)
	}
}

// 16: a dependency-heavy async script (numpy stand-in), polled through
// job-stream:// and get_job_output until finished.
func example16(t *testing.T, e *seedEnv) {
	id := startJob(t, e.pymcp, "run_script_with_dependencies_async", map[string]any{
		"script_content": "import numpy as np; import time; [print(np.sqrt(i)) or time.sleep(0.3) for i in range(10)]",
		"python_version": "3.13", "dependencies": []string{"numpy"}, "stream": true,
	})
	for range 5 {
		jobStream(t, e.pymcp, id)
		if s, _, _ := mcptest.Call(t, e.pymcp, "get_job_output", map[string]any{"job_id": id}); s["status"] == "finished" {
			break
		}
		time.Sleep(time.Second)
	}
	final := jobOutput(t, e.pymcp, id)
	lines := strings.Split(strings.TrimSpace(final["stdout"].(string)), "\n")
	if len(lines) != 10 || lines[9] != strconv.FormatFloat(math.Sqrt(9), 'f', 1, 64) {
		t.Errorf("final stdout = %q", final["stdout"])
	}
}

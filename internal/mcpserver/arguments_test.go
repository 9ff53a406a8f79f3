package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestArgumentErrorsNameTheField: what the SDK would reject with
// "validating root: unexpected additional properties" or "<invalid
// reflect.Value>", pyexec rejects naming the field, the path to it and the
// field probably meant; a null for an optional field is "not given".
func TestArgumentErrorsNameTheField(t *testing.T) {
	h := newJobHarness(t, time.Minute)
	ctx := context.Background()
	for _, c := range []struct {
		tool string
		args map[string]any
		want string // "" : not an error
	}{
		{"run_python", map[string]any{"code": nil}, "code: give one of code (inline source) or script_path"},
		{"run_python", map[string]any{"code": "print(1)", "script_path": nil, "env_vars": nil}, ""},
		{"run_python", map[string]any{"code": "print(1)", "timeout_seconds": 3}, `timeout_seconds: unknown field (did you mean "timeout"?). run_python takes: args, code, cwd`},
		{"run_python", map[string]any{"code": "print(1)", "limits": map[string]any{"memory_byte": 5}}, `limits.memory_byte: unknown field (did you mean "memory_bytes"?)`},
		{"run_python", map[string]any{"code": "print(1)", "timeout": "3"}, "timeout: must be a number, got a string"},
		{"run_python", map[string]any{"code": "print(1)", "env_vars": map[string]any{"A": 5}}, "env_vars.A: must be a string, got the number 5"},
		{"run_python", map[string]any{"code": "print(1)", "args": "a b"}, "args: must be a list of strings, got a string"},
		{"run_python", map[string]any{"code": "print(1)", "args": []any{"a\x00b"}}, "args: argument 0 contains a NUL byte"},
		{"run_python", map[string]any{"code": "print(1)", "sandbox": "bogus"}, "sandbox: unknown policy"},
		{"run_python_batch", map[string]any{"requests": []any{map[string]any{"code": "1"}, map[string]any{"code": "1", "timeout_seconds": 1}}}, `requests[1].timeout_seconds: unknown field (did you mean "timeout"?)`},
		{"get_job", map[string]any{"job_id": nil}, "job_id: is required and cannot be null; give a string"},
		{"get_job", map[string]any{}, "job_id: is required: give a string"},
		{"get_job", map[string]any{"job_id": "x", "max_bytes": 1e300}, "max_bytes: must be a whole number from -9007199254740991 to 9007199254740991"},
		{"get_job", map[string]any{"job_id": "x", "stdout_offset": 1.5}, "stdout_offset: must be a whole number, got 1.5"},
		{"get_job", map[string]any{"job_id": "x", "wait": -1}, "wait: must be 0 or more seconds"},
		{"list_jobs", map[string]any{"status": "done"}, `status: "done" is not a job status; use pending, running, completed, failed or cancelled`},
		{"list_jobs", map[string]any{"status_filter": "running"}, `status_filter: unknown field (did you mean "status"?)`},
		{"prune_jobs", map[string]any{"max_age_hours": -2}, "max_age_hours: must be a finite number of hours >= 0"},
	} {
		res := h.call(t, ctx, c.tool, c.args, nil)
		got := text(res)
		if c.want == "" {
			if res.IsError {
				t.Errorf("%s %v: unexpected error %q", c.tool, c.args, got)
			}
			continue
		}
		if !res.IsError || !strings.Contains(got, c.want) || strings.Contains(got, "reflect.Value") || strings.Contains(got, "validating root") {
			t.Errorf("%s %v:\n got %q\nwant %q", c.tool, c.args, got, c.want)
		}
	}
}

// TestRunPythonHugeTimeoutGetsTheJobLimit: timeout 1e300 on a job-backed
// run_python is the job limit (it once outlived --job-timeout).
func TestRunPythonHugeTimeoutGetsTheJobLimit(t *testing.T) {
	h := newJobHarness(t, time.Minute)
	ctx := context.Background()
	res := h.call(t, ctx, "run_python", map[string]any{"code": "print(1)", "timeout": 1e300, "mode": "async"}, nil)
	out := decode[RunPythonOutput](t, res)
	if res.IsError || out.JobID == "" {
		t.Fatalf("start: %s", text(res))
	}
	job := decode[GetJobOutput](t, h.call(t, ctx, "get_job", map[string]any{"job_id": out.JobID}, nil))
	if job.TimeoutSeconds != 3600 {
		t.Fatalf("timeout_seconds %g, want the job limit 3600", job.TimeoutSeconds)
	}
}

// TestCancelSaysWhatHappened: cancel_job says it stopped a job only when it
// did; a second cancel says it was already cancelled.
func TestCancelSaysWhatHappened(t *testing.T) {
	h := newJobHarness(t, time.Minute)
	ctx := context.Background()
	out := decode[RunPythonOutput](t, h.call(t, ctx, "run_python", map[string]any{"code": "import time; time.sleep(60)", "mode": "async"}, nil))
	first := text(h.call(t, ctx, "cancel_job", map[string]any{"job_id": out.JobID}, nil))
	second := text(h.call(t, ctx, "cancel_job", map[string]any{"job_id": out.JobID}, nil))
	if !strings.Contains(first, "it was stopped and its whole process tree killed") {
		t.Errorf("first cancel: %q", first)
	}
	if !strings.Contains(second, "was already **cancelled**; nothing to do") || strings.Contains(second, "killed") {
		t.Errorf("second cancel: %q", second)
	}
	done := decode[RunPythonOutput](t, h.call(t, ctx, "run_python", map[string]any{"code": "print(1)", "mode": "async"}, nil))
	h.call(t, ctx, "get_job", map[string]any{"job_id": done.JobID, "wait": 30}, nil)
	for {
		j := decode[GetJobOutput](t, h.call(t, ctx, "get_job", map[string]any{"job_id": done.JobID, "wait": 30}, nil))
		if j.Status.Terminal() {
			break
		}
	}
	if got := text(h.call(t, ctx, "cancel_job", map[string]any{"job_id": done.JobID}, nil)); !strings.Contains(got, "had already finished (**completed**); nothing to cancel") {
		t.Errorf("cancel of a finished job: %q", got)
	}
}

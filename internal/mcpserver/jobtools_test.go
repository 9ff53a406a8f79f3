package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/testutil/gate"
	"github.com/pyexec/pyexec/internal/testutil/proc"
)

// jobHarness is a go-sdk client on a server whose executor runs jobs.
type jobHarness struct {
	*harness
}

func newJobHarness(t testing.TB, budget time.Duration) *jobHarness {
	t.Helper()
	eng, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	lj, err := executor.OpenLocalJobs(context.Background(), executor.NewLocal(eng, "test", 4), jobs.Config{StateDir: eng.Config().StateDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lj.Close(context.Background()) })
	return &jobHarness{harness: connect(t, lj, eng.Config().Workspace, Options{Version: "test", SyncBudget: budget})}
}

// follow reads a job with get_job until its output is done, checking that
// the offsets only move forward, and returns all stdout.
func (h *jobHarness) follow(t *testing.T, id string, off int64) (string, GetJobOutput) {
	t.Helper()
	var all strings.Builder
	for {
		res := h.call(t, context.Background(), "get_job", map[string]any{"job_id": id, "stdout_offset": off, "wait": 30}, nil)
		if res.IsError {
			t.Fatalf("get_job: %s", text(res))
		}
		out := decode[GetJobOutput](t, res)
		if out.NextStdoutOffset < off || out.NextStdoutOffset-off != int64(len(out.Stdout)) {
			t.Fatalf("offset went from %d to %d with %d bytes", off, out.NextStdoutOffset, len(out.Stdout))
		}
		all.WriteString(out.Stdout)
		off = out.NextStdoutOffset
		if out.OutputDone {
			return all.String(), out
		}
	}
}

func TestJobToolsListed(t *testing.T) {
	h := newJobHarness(t, time.Minute)
	list, err := h.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		for _, schema := range []any{tool.InputSchema, tool.OutputSchema} {
			for _, path := range undescribed(schema, tool.Name) {
				t.Errorf("field without description: %s", path)
			}
		}
		if strings.HasSuffix(tool.Name, "_job") || strings.HasSuffix(tool.Name, "_jobs") {
			checkSnapshot(t, tool)
		}
	}
	if got := strings.Join(names, ","); got != "benchmark_python,cancel_job,chunk_code,env_create,env_delete,env_list,format_code,get_job,lint_code,list_files,list_jobs,plan_batch,prune_jobs,read_file,run_python,run_python_batch,server_info,session_close,session_create,session_export,session_interrupt,session_list,session_reset,write_file" {
		t.Fatalf("tools: %s", got)
	}
	tmpls, err := h.session.ListResourceTemplates(context.Background(), nil)
	if err != nil || len(tmpls.ResourceTemplates) != 8 { // job:// (3), job://{id}/artifacts/{name}, session:// (3), pyexec://workspace/{+path}
		t.Fatalf("templates %+v %v", tmpls, err)
	}
}

func TestSmartAsyncHandoffThenIncrementalReads(t *testing.T) {
	h := newJobHarness(t, 500*time.Millisecond)
	// In the workspace: the rest of the test dir (0700) does not exist for
	// a run executing as nobody.
	gate := filepath.Join(h.workspace, "gate")
	code := fmt.Sprintf("import os, time\nprint('first', flush=True)\nwhile not os.path.exists(%q): time.sleep(0.01)\nfor i in range(3): print('line', i, flush=True)\n", gate)
	res := h.call(t, context.Background(), "run_python", map[string]any{"code": code, "job_label": "smart"}, nil)
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	out := decode[RunPythonOutput](t, res)
	if out.JobID == "" || out.Status != "running" || !strings.Contains(text(res), "still running") {
		t.Fatalf("no handoff: %+v\n%s", out, text(res))
	}
	os.WriteFile(gate, nil, 0o644)
	rest, final := h.follow(t, out.JobID, out.NextStdoutOffset)
	if all := out.Stdout + rest; all != "first\nline 0\nline 1\nline 2\n" {
		t.Fatalf("handoff output %q + later %q: lost or repeated bytes", out.Stdout, rest)
	}
	if final.Status != jobs.StatusCompleted || final.ExitCode == nil || *final.ExitCode != 0 || final.Label != "smart" {
		t.Fatalf("final job %+v", final.Job)
	}
}

// A sync run that ends within the budget is a plain result and leaves no job.
func TestQuickSyncRunLeavesNoJob(t *testing.T) {
	h := newJobHarness(t, time.Minute)
	res := h.call(t, context.Background(), "run_python", map[string]any{"code": "print('quick')"}, nil)
	if q := decode[RunPythonOutput](t, res); q.Stdout != "quick\n" || q.JobID != "" || !q.Success {
		t.Fatalf("quick run %+v", q)
	}
	list := decode[jobs.JobList](t, h.call(t, context.Background(), "list_jobs", map[string]any{}, nil))
	if list.Total != 0 {
		t.Fatalf("list_jobs %+v", list)
	}
}

func TestAsyncCancelListPrune(t *testing.T) {
	h := newJobHarness(t, time.Minute)
	ctx := context.Background()
	mark := proc.Mark(t)
	code := proc.Sleeper(mark) + "import time\nprint('up', flush=True)\ntime.sleep(600)"
	res := h.call(t, ctx, "run_python", map[string]any{"code": code, "mode": "async", "job_label": "sleeper"}, nil)
	out := decode[RunPythonOutput](t, res)
	if res.IsError || out.JobID == "" {
		t.Fatalf("async start: %s", text(res))
	}
	// Long-poll until the script has printed its line (print may arrive in
	// two writes: "up", then "\n").
	var printed string
	for !strings.HasSuffix(printed, "\n") {
		g := decode[GetJobOutput](t, h.call(t, ctx, "get_job", map[string]any{"job_id": out.JobID, "stdout_offset": len(printed), "wait": 30}, nil))
		if g.Status != jobs.StatusRunning {
			t.Fatalf("get_job %+v", g)
		}
		printed += g.Stdout
	}
	if printed != "up\n" {
		t.Fatalf("printed %q", printed)
	}
	res = h.call(t, ctx, "cancel_job", map[string]any{"job_id": out.JobID}, nil)
	if c := decode[jobs.Job](t, res); c.Status != jobs.StatusCancelled {
		t.Fatalf("cancel_job %+v", c)
	}
	waitGone(t, mark)
	g := decode[GetJobOutput](t, h.call(t, ctx, "get_job", map[string]any{"job_id": out.JobID}, nil))
	if g.Stdout != "up\n" || !g.OutputDone {
		t.Fatalf("output after cancel %+v", g)
	}

	res = h.call(t, ctx, "run_python", map[string]any{"code": "print(1)", "mode": "async"}, nil)
	done := decode[RunPythonOutput](t, res)
	h.follow(t, done.JobID, 0)
	list := decode[jobs.JobList](t, h.call(t, ctx, "list_jobs", map[string]any{"status": "cancelled"}, nil))
	if list.Total != 1 || list.Jobs[0].Label != "sleeper" {
		t.Fatalf("list_jobs cancelled: %+v", list)
	}
	if res := h.call(t, ctx, "list_jobs", map[string]any{"status": "nope"}, nil); !res.IsError {
		t.Fatal("bad status accepted")
	}
	pr := decode[jobs.PruneResult](t, h.call(t, ctx, "prune_jobs", map[string]any{"keep_failed": true}, nil))
	if pr.Removed != 1 || pr.Remaining != 1 {
		t.Fatalf("prune %+v", pr)
	}
	if res := h.call(t, ctx, "get_job", map[string]any{"job_id": done.JobID}, nil); !res.IsError || !strings.Contains(text(res), "no job") {
		t.Fatalf("pruned job: %s", text(res))
	}
	if res := h.call(t, ctx, "run_python", map[string]any{"code": "1", "mode": "later"}, nil); !res.IsError {
		t.Fatal("bad mode accepted")
	}
}

func TestJobResourcesAndSubscription(t *testing.T) {
	h := newJobHarness(t, time.Minute)
	ctx := context.Background()
	gateFile := gate.Path(t)
	code := fmt.Sprintf("import os, sys, time\nprint('out 1', flush=True)\nprint('err 1', file=sys.stderr, flush=True)\nwhile not os.path.exists(%q): time.sleep(0.01)\nprint('out 2', flush=True)\n", gateFile)
	out := decode[RunPythonOutput](t, h.call(t, ctx, "run_python", map[string]any{"code": code, "mode": "async"}, nil))
	uri := "job://" + out.JobID + "/output"
	if err := h.session.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	h.call(t, ctx, "get_job", map[string]any{"job_id": out.JobID, "wait": 30}, nil) // first output is there
	os.WriteFile(gateFile, nil, 0o644)
	select {
	case got := <-h.updates:
		if got != uri {
			t.Fatalf("update for %s", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/resources/updated")
	}
	h.follow(t, out.JobID, 0)

	for _, u := range []string{uri, "job-stream://" + out.JobID} {
		r, err := h.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: u})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Contents[0].Text; got != "---STDOUT---\nout 1\nout 2\n---STDERR---\nerr 1\n" {
			t.Fatalf("%s = %q", u, got)
		}
	}
	r, err := h.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "job://" + out.JobID})
	if err != nil || !strings.Contains(r.Contents[0].Text, `"status": "completed"`) {
		t.Fatalf("job resource %+v %v", r, err)
	}
	if _, err := h.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "job://nope"}); err == nil {
		t.Fatal("unknown job resource read")
	}
}

func TestScriptProgressReachesWaitingCall(t *testing.T) {
	h := newJobHarness(t, time.Minute)
	gateFile := gate.Path(t)
	var once sync.Once
	h.onProg = func(p *mcp.ProgressNotificationParams) {
		if strings.Contains(p.Message, "2/4 (50%): halfway") {
			once.Do(func() { os.WriteFile(gateFile, nil, 0o644) })
		}
	}
	code := fmt.Sprintf("import os, time, pyexec_progress\npyexec_progress.report(2, 4, 'halfway')\nwhile not os.path.exists(%q): time.sleep(0.01)\n", gateFile)
	res := h.call(t, context.Background(), "run_python", map[string]any{"code": code}, "tok-script")
	if res.IsError || !decode[RunPythonOutput](t, res).Success {
		t.Fatalf("run: %s", text(res))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 1; i < len(h.progress); i++ {
		if h.progress[i].Progress <= h.progress[i-1].Progress {
			t.Fatalf("progress did not increase: %v then %v", h.progress[i-1].Progress, h.progress[i].Progress)
		}
	}
}

// checkSnapshot compares a job tool's schemas with testdata (TestToolsAndSchemas
// covers the tools of a server without jobs).
func checkSnapshot(t *testing.T, tool *mcp.Tool) {
	t.Helper()
	snapshot := map[string]any{"description": tool.Description, "inputSchema": tool.InputSchema, "outputSchema": tool.OutputSchema}
	got, _ := json.MarshalIndent(snapshot, "", "  ")
	golden := filepath.Join("testdata", "schemas", tool.Name+".json")
	if *update {
		os.WriteFile(golden, append(got, '\n'), 0o644)
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/mcpserver -update to create it)", err)
	}
	if strings.TrimSpace(string(want)) != strings.TrimSpace(string(got)) {
		t.Errorf("%s schema changed; if intended, run go test ./internal/mcpserver -update\n%s", tool.Name, got)
	}
}

func newJobHarnessB(b *testing.B) *jobHarness { return newJobHarness(b, time.Minute) }

func (h *jobHarness) callB(tb testing.TB, ctx context.Context, name string, args any) *mcp.CallToolResult {
	tb.Helper()
	res, err := h.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		tb.Fatalf("CallTool %s: %v %s", name, err, text(res))
	}
	return res
}

// With jobs, a sync call cancelled by the client (before the budget) still
// kills its run's tree and leaves no job behind.
func TestCancelledSyncCallKillsJobBackedRun(t *testing.T) {
	h := newJobHarness(t, time.Minute)
	pidFile := filepath.Join(h.workspace, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	h.onProg = func(p *mcp.ProgressNotificationParams) {
		if _, err := os.Stat(pidFile); err == nil {
			cancel()
		}
	}
	mark := proc.Mark(t)
	code := proc.Sleeper(mark) + fmt.Sprintf("import os, time\nopen(%q + '.tmp', 'w').write(str(os.getpid()))\nos.rename(%q + '.tmp', %q)\ntime.sleep(600)", pidFile, pidFile, pidFile)
	params := &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code}}
	params.SetProgressToken("tok-cancel")
	if _, err := h.session.CallTool(ctx, params); err == nil {
		t.Fatal("cancelled call returned no error")
	}
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatal(err)
	}
	waitGone(t, mark)
	// The server forgets the job right after the kill, which the client
	// cannot observe: poll briefly.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		list := decode[jobs.JobList](t, h.call(t, context.Background(), "list_jobs", map[string]any{}, nil))
		if list.Total == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a cancelled sync run left jobs: %+v", list)
		}
	}
}

func TestAsyncBatchStartsOneJobPerSnippet(t *testing.T) {
	h := newJobHarness(t, time.Minute)
	res := h.call(t, context.Background(), "run_python_batch", map[string]any{"codes": []string{"print('a')", "print('b')"}, "mode": "async", "job_label": "batch"}, nil)
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	out := decode[executor.BatchResult](t, res)
	for i, want := range []string{"a\n", "b\n"} {
		if out.Results[i].JobID == "" {
			t.Fatalf("entry %d: %+v", i, out.Results[i])
		}
		if got, _ := h.follow(t, out.Results[i].JobID, 0); got != want {
			t.Fatalf("entry %d printed %q", i, got)
		}
	}
	if res := h.call(t, context.Background(), "run_python_batch", map[string]any{"codes": []string{"1"}, "mode": "nope"}, nil); !res.IsError {
		t.Fatal("bad batch mode accepted")
	}
}

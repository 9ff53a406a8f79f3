package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/testutil/gate"
	"github.com/pyexec/pyexec/internal/testutil/proc"
)

func openJobs(t *testing.T, cfg engine.Config, jc jobs.Config) *LocalJobs {
	t.Helper()
	if cfg.Workspace == "" {
		cfg.Workspace = t.TempDir()
	}
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	jc.StateDir = eng.Config().StateDir
	lj, err := OpenLocalJobs(context.Background(), NewLocal(eng, "test", 2), jc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lj.Close(context.Background()) })
	return lj
}

// A real script reports progress through the helper module and the
// inherited descriptor; the job sees it, and so does a subscriber.
func TestJobProgressFromRealScript(t *testing.T) {
	lj := openJobs(t, engine.Config{}, jobs.Config{NotifyInterval: time.Millisecond})
	ctx := context.Background()
	gateFile := gate.Path(t)
	code := fmt.Sprintf(`import os, time, pyexec_progress
pyexec_progress.report(1, 4, "first")
print("reported", flush=True)
while not os.path.exists(%q): time.sleep(0.01)
pyexec_progress.report(4, 4, "done")
`, gateFile)
	j, err := lj.Start(ctx, engine.Request{Code: code}, "progress")
	if err != nil {
		t.Fatal(err)
	}
	events, unsub, err := lj.Subscribe(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	var last jobs.Event
	for ev := range events {
		if ev.Progress != nil && ev.Progress.Current == 1 {
			if ev.Progress.Total != 4 || ev.Progress.Message != "first" {
				t.Fatalf("progress %+v", ev.Progress)
			}
			os.WriteFile(gateFile, nil, 0o644)
		}
		last = ev
	}
	if !last.Done || last.Status != jobs.StatusCompleted {
		got, _ := lj.Output(ctx, j.ID, jobs.Cursor{})
		t.Fatalf("last event %+v; output %+v", last, got)
	}
	done, _ := lj.Job(ctx, j.ID)
	if done.Progress == nil || done.Progress.Current != 4 || done.Progress.Message != "done" {
		t.Fatalf("final progress %+v", done.Progress)
	}
}

// Jobs are not held to the synchronous maximum: their own limit applies.
func TestJobTimeoutIsTheJobsOwn(t *testing.T) {
	lj := openJobs(t, engine.Config{MaxTimeout: 100 * time.Millisecond}, jobs.Config{JobTimeout: time.Minute})
	ctx := context.Background()
	out, err := lj.RunOrHandoff(ctx, engine.Request{Code: "import time; time.sleep(0.5); print('slept')"}, SyncOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Result == nil || out.Result.Stdout != "slept\n" || out.Result.TimedOut {
		t.Fatalf("outcome %+v", out.Result)
	}
	out, err = lj.RunOrHandoff(ctx, engine.Request{Code: "import time; time.sleep(60)", Timeout: 0.2}, SyncOptions{}, nil)
	if err != nil || out.Result == nil || !out.Result.TimedOut {
		t.Fatalf("request timeout within the job limit: %+v %v", out.Result, err)
	}
}

func TestRunOrHandoffAndCancelKillsTree(t *testing.T) {
	// The pid file goes in the workspace: the sandbox lets runs write only there.
	ws := t.TempDir()
	lj := openJobs(t, engine.Config{Workspace: ws}, jobs.Config{})
	ctx := context.Background()
	mark := proc.Mark(t)
	code := proc.Sleeper(mark) + "import time\nprint('started', flush=True)\ntime.sleep(600)"
	out, err := lj.RunOrHandoff(ctx, engine.Request{Code: code}, SyncOptions{Budget: 300 * time.Millisecond, Label: "long"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Result != nil || out.Output == nil {
		t.Fatalf("no handoff: %+v", out)
	}
	// Read the output by cursor until the first line is there.
	got := out.Output.Stdout
	cur := jobs.Cursor{StdoutOffset: out.Output.StdoutOffset, Wait: 30 * time.Second}
	for !strings.Contains(got, "started\n") {
		ch, err := lj.Output(ctx, out.Job.ID, cur)
		if err != nil {
			t.Fatal(err)
		}
		got += ch.Stdout
		cur.StdoutOffset = ch.StdoutOffset
	}
	if len(proc.Marked(mark)) != 1 {
		t.Fatalf("the run's child is not running: %v", proc.Marked(mark))
	}
	j, err := lj.Cancel(ctx, out.Job.ID)
	if err != nil || j.Status != jobs.StatusCancelled {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	if left := proc.Marked(mark); len(left) > 0 {
		t.Fatalf("processes %v alive after cancel returned", left)
	}
	list, _ := lj.Jobs(ctx, jobs.Filter{Label: "long"})
	if list.Total != 1 {
		t.Fatalf("handed-off job not listed: %+v", list)
	}
}

// A job that floods its output keeps only the log cap on disk, says so, and
// still reports how much it printed.
func TestJobOutputFloodIsCapped(t *testing.T) {
	lj := openJobs(t, engine.Config{}, jobs.Config{LogCap: 1 << 20})
	ctx := context.Background()
	j, err := lj.Start(ctx, engine.Request{Code: "import sys\nblock = 'x' * 65535 + '\\n'\nfor _ in range(320): sys.stdout.write(block)\n"}, "")
	if err != nil {
		t.Fatal(err)
	}
	events, unsub, err := lj.Subscribe(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	for range events {
	}
	done, _ := lj.Job(ctx, j.ID)
	if done.Status != jobs.StatusCompleted || !done.StdoutTruncated || done.StdoutBytes != 320*65536 {
		t.Fatalf("job %+v", done)
	}
	st, err := os.Stat(filepath.Join(lj.Engine().Config().StateDir, "jobs", j.ID, "stdout.log"))
	if err != nil || st.Size() > 1<<20+200 {
		t.Fatalf("log size %v %v", st.Size(), err)
	}
}

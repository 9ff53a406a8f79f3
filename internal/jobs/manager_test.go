package jobs

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

func TestCancelRunningJobKillsItAndKeepsOutput(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx := context.Background()
	j, _ := m.Start(ctx, code("x"), "")
	c := f.next(t)
	c.stdout(t, "before cancel\n")
	got, err := m.Cancel(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if why := <-c.ended; why != "cancelled" {
		t.Fatalf("run ended by %q, want its context cancelled", why)
	}
	if got.Status != StatusCancelled || got.FinishedAt == nil || got.Error != MsgCancelled {
		t.Fatalf("after cancel: %+v", got)
	}
	ch, err := m.Output(ctx, j.ID, Cursor{})
	if err != nil || ch.Stdout != "before cancel\n" || !ch.Done {
		t.Fatalf("output after cancel = %+v, %v", ch, err)
	}
	// Idempotent on a finished job.
	again, err := m.Cancel(ctx, j.ID)
	if err != nil || again.Status != StatusCancelled {
		t.Fatalf("second cancel = %+v, %v", again, err)
	}
	if _, err := m.Cancel(ctx, "unknown"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
}

func TestQueueIsFIFOAndBounded(t *testing.T) {
	m, f, _ := openTest(t, func(c *Config) { c.MaxConcurrent = 1; c.MaxQueue = 2 })
	ctx := context.Background()
	a, _ := m.Start(ctx, code("A"), "")
	ca := f.next(t) // A occupies the only slot
	b, err := m.Start(ctx, code("B"), "")
	if err != nil {
		t.Fatal(err)
	}
	cj, err := m.Start(ctx, code("C"), "")
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != StatusPending || cj.Status != StatusPending {
		t.Fatalf("queued jobs: %s %s", b.Status, cj.Status)
	}
	if _, err := m.Start(ctx, code("D"), ""); !errors.Is(err, ErrBusy) {
		t.Fatalf("start past max-queue: %v, want ErrBusy", err)
	}
	list, err := m.List(ctx, Filter{Status: StatusPending})
	if err != nil || list.Total != 2 {
		t.Fatalf("pending list = %+v, %v", list, err)
	}
	ca.exit(t, 0)
	cb := f.next(t)
	if cb.req.Code != "B" {
		t.Fatalf("second run is %q, want B (arrival order)", cb.req.Code)
	}
	if _, err := m.Start(ctx, code("E"), ""); err != nil {
		t.Fatalf("queue has room again: %v", err)
	}
	cb.exit(t, 1)
	cc := f.next(t)
	if cc.req.Code != "C" {
		t.Fatalf("third run is %q, want C", cc.req.Code)
	}
	cc.exit(t, 0)
	f.next(t).exit(t, 0)
	if j := waitDone(t, m, a.ID); j.Status != StatusCompleted {
		t.Fatalf("A = %s", j.Status)
	}
	if j := waitDone(t, m, b.ID); j.Status != StatusFailed || *j.ExitCode != 1 {
		t.Fatalf("B (exit 1) = %s", j.Status)
	}
}

func TestCancelPendingJobNeverRuns(t *testing.T) {
	m, f, _ := openTest(t, func(c *Config) { c.MaxConcurrent = 1 })
	ctx := context.Background()
	m.Start(ctx, code("A"), "")
	ca := f.next(t)
	b, _ := m.Start(ctx, code("B"), "")
	got, err := m.Cancel(ctx, b.ID)
	if err != nil || got.Status != StatusCancelled {
		t.Fatalf("cancel pending = %+v, %v", got, err)
	}
	m.Start(ctx, code("C"), "")
	ca.exit(t, 0)
	if c := f.next(t); c.req.Code != "C" {
		t.Fatalf("ran %q after cancelling B, want C", c.req.Code)
	} else {
		c.exit(t, 0)
	}
	if j, _ := m.Get(ctx, b.ID); j.Status != StatusCancelled || j.StartedAt != nil {
		t.Fatalf("B = %+v", j)
	}
}

func TestListNewestFirstWithLabelAndTotal(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx := context.Background()
	var ids []string
	for i, label := range []string{"x", "y", "x", "x"} {
		j, err := m.Start(ctx, engine.Request{Code: string(rune('a' + i)), EnvVars: map[string]string{"TOKEN": "secret"}}, label)
		if err != nil {
			t.Fatal(err)
		}
		f.next(t).exit(t, 0)
		waitDone(t, m, j.ID)
		ids = append(ids, j.ID)
	}
	got, err := m.List(ctx, Filter{Label: "x", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got.Total != 3 || len(got.Jobs) != 2 || got.Jobs[0].ID != ids[3] || got.Jobs[1].ID != ids[2] {
		t.Fatalf("list = total %d, %d jobs", got.Total, len(got.Jobs))
	}
	if got.Jobs[0].Request != nil {
		t.Fatal("list included requests without IncludeRequest")
	}
	j, err := m.Get(ctx, ids[0])
	if err != nil || j.Request == nil || j.Request.Code != "a" || j.Request.EnvVars["TOKEN"] != "[redacted]" {
		t.Fatalf("get = %+v, %v (env values must be redacted in the store)", j.Request, err)
	}
	if _, err := m.List(ctx, Filter{Status: "bogus"}); err == nil {
		t.Fatal("bogus status accepted")
	}
}

func TestPrune(t *testing.T) {
	tests := []struct {
		name        string
		opts        PruneOptions
		wantRemoved int
	}{
		{"everything finished", PruneOptions{}, 3},
		{"keep completed", PruneOptions{KeepCompleted: true}, 2},
		{"keep failed and cancelled", PruneOptions{KeepFailed: true}, 1},
		{"keep both", PruneOptions{KeepCompleted: true, KeepFailed: true}, 0},
		{"too young", PruneOptions{MaxAgeHours: 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, f, cfg := openTest(t, nil)
			ctx := context.Background()
			finished := map[string]bool{}
			for _, exit := range []int{0, 2} {
				j, _ := m.Start(ctx, code("x"), "")
				c := f.next(t)
				c.stdout(t, "out")
				c.exit(t, exit)
				waitDone(t, m, j.ID)
				finished[j.ID] = true
			}
			cj, _ := m.Start(ctx, code("x"), "")
			f.next(t)
			m.Cancel(ctx, cj.ID)
			waitDone(t, m, cj.ID) // its final state is stored after the tree is gone
			finished[cj.ID] = true
			running, _ := m.Start(ctx, code("x"), "")
			rc := f.next(t)
			defer rc.exit(t, 0)

			res, err := m.Prune(ctx, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Removed != tt.wantRemoved || res.Remaining != 4-tt.wantRemoved {
				t.Fatalf("prune = %+v, want removed %d remaining %d", res, tt.wantRemoved, 4-tt.wantRemoved)
			}
			gone := 0
			for id := range finished {
				_, err := m.Get(ctx, id)
				_, statErr := os.Stat(jobDir(cfg.StateDir, id))
				if errors.Is(err, ErrNotFound) {
					gone++
					if !os.IsNotExist(statErr) {
						t.Errorf("logs of pruned job %s still there", id)
					}
				} else if statErr != nil {
					t.Errorf("logs of kept job %s: %v", id, statErr)
				}
			}
			if gone != tt.wantRemoved {
				t.Fatalf("%d jobs gone, want %d", gone, tt.wantRemoved)
			}
			if j, err := m.Get(ctx, running.ID); err != nil || j.Status != StatusRunning {
				t.Fatalf("running job after prune: %+v, %v", j, err)
			}
		})
	}
}

func TestJobTimeoutPassedToRun(t *testing.T) {
	tests := []struct {
		name       string
		jobTimeout time.Duration
		reqTimeout float64
		want       time.Duration
	}{
		{"default", 0, 0, DefaultJobTimeout},
		{"request shorter", 10 * time.Second, 2, 2 * time.Second},
		{"request longer is capped", 10 * time.Second, 60, 10 * time.Second},
		{"no limit", -1, 0, 0},
		{"no limit but request asks", -1, 5, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, f, _ := openTest(t, func(c *Config) { c.JobTimeout = tt.jobTimeout })
			j, err := m.Start(context.Background(), engine.Request{Code: "x", Timeout: tt.reqTimeout}, "")
			if err != nil {
				t.Fatal(err)
			}
			c := f.next(t)
			if c.opts.Timeout != tt.want || j.TimeoutSeconds != tt.want.Seconds() {
				t.Fatalf("timeout = %v (job says %vs), want %v", c.opts.Timeout, j.TimeoutSeconds, tt.want)
			}
			if c.opts.HelperDir == "" || c.opts.ProgressPipe == nil {
				t.Fatalf("run options lack progress wiring: %+v", c.opts)
			}
			c.exit(t, 0)
		})
	}
}

func TestRunErrorFailsJob(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx := context.Background()
	j, _ := m.Start(ctx, code("x"), "")
	f.next(t).do(t, fakeStep{err: errors.New("uv: no solution for numpy==0")})
	got := waitDone(t, m, j.ID)
	if got.Status != StatusFailed || got.Error != "uv: no solution for numpy==0" || got.ExitCode != nil {
		t.Fatalf("job = %+v", got)
	}
}

func TestValidateRejectsBeforeCreatingJob(t *testing.T) {
	m, _, _ := openTest(t, func(c *Config) {
		c.Validate = func(_ context.Context, r engine.Request) error {
			if r.Code == "" {
				return errors.New("code: required")
			}
			return nil
		}
	})
	if _, err := m.Start(context.Background(), engine.Request{}, ""); err == nil {
		t.Fatal("invalid request accepted")
	}
	if l, _ := m.List(context.Background(), Filter{}); l.Total != 0 {
		t.Fatalf("%d jobs created for an invalid request", l.Total)
	}
}

// Two servers on one state dir (two MCP clients starting pyexec with the
// default --state-dir): neither fails the other's running jobs, each reads
// the other's output, and a dead one's jobs are recovered by the survivor.
func TestManagersShareStateDir(t *testing.T) {
	a, fa, cfg := openTest(t, nil)
	ctx := context.Background()
	j, _ := a.Start(ctx, code("A"), "")
	ca := fa.next(t)
	ca.stdout(t, "from A\n")

	fb := newFake()
	cfgB := cfg
	cfgB.Run = fb.run
	b, err := Open(ctx, cfgB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	got, err := b.Get(ctx, j.ID)
	if err != nil || got.Status != StatusRunning {
		t.Fatalf("B sees A's job as %+v, %v; want it left running", got, err)
	}
	ch, err := b.Output(ctx, j.ID, Cursor{})
	if err != nil || ch.Stdout != "from A\n" || ch.Done {
		t.Fatalf("B reads A's output: %+v, %v", ch, err)
	}
	// A long-poll from B on A's job sees A's next line (B polls the log).
	got2 := make(chan Chunk, 1)
	go func() {
		ch, _ := b.Output(ctx, j.ID, Cursor{StdoutOffset: ch.StdoutOffset, Wait: time.Minute})
		got2 <- ch
	}()
	ca.stdout(t, "more\n")
	if ch := <-got2; ch.Stdout != "more\n" {
		t.Fatalf("B's long poll got %+v", ch)
	}
	if _, err := b.Cancel(ctx, j.ID); err == nil {
		t.Fatal("B cancelled A's job without an error")
	}

	a.crash()
	defer func() { a.stop(); a.wg.Wait() }()
	if err := b.recoverOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = b.Get(ctx, j.ID)
	if got.Status != StatusFailed || got.Error != MsgRestarted {
		t.Fatalf("after A died: %+v", got)
	}
}

func TestCloseFailsRunningAndPendingJobs(t *testing.T) {
	f := newFake()
	cfg := Config{StateDir: t.TempDir(), Run: f.run, Logger: quietLogger(), MaxConcurrent: 1}
	ctx := context.Background()
	m, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.Start(ctx, code("A"), "")
	c := f.next(t)
	c.stdout(t, "partial")
	b, _ := m.Start(ctx, code("B"), "")
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, code("C"), ""); !errors.Is(err, ErrClosed) {
		t.Fatalf("start after close: %v", err)
	}
	m2, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(ctx)
	for _, id := range []string{a.ID, b.ID} {
		j, err := m2.Get(ctx, id)
		if err != nil || j.Status != StatusFailed || j.Error != MsgShutdown {
			t.Fatalf("after shutdown: %+v, %v", j, err)
		}
	}
	ch, _ := m2.Output(ctx, a.ID, Cursor{})
	if ch.Stdout != "partial" {
		t.Fatalf("output after shutdown = %q", ch.Stdout)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "pylib", "pyexec_progress.py")); err != nil {
		t.Fatal(err)
	}
}

// TestJobTimeoutIsCappedNotWrapped: a request's timeout beyond the job
// limit (1e300 seconds once wrapped to "no limit at all") gets the job
// limit; with no job limit it gets the longest duration, never a negative.
func TestJobTimeoutIsCappedNotWrapped(t *testing.T) {
	for _, c := range []struct {
		jobTimeout time.Duration
		req        float64
		want       float64
	}{
		{time.Hour, 1e300, 3600},
		{time.Hour, 1e10, 3600},
		{time.Hour, 5, 5},
		{time.Hour, 0, 3600},
		{-1, 1e300, (time.Duration(math.MaxInt64)).Seconds()},
		{-1, 0, 0},
	} {
		m, _, _ := openTest(t, func(cfg *Config) { cfg.JobTimeout = c.jobTimeout; cfg.MaxConcurrent = 1 })
		if got := m.timeoutFor(engine.Request{Code: "1", Timeout: c.req}).Seconds(); got != c.want {
			t.Errorf("job limit %v, request %g: timeout %gs, want %gs", c.jobTimeout, c.req, got, c.want)
		}
	}
}

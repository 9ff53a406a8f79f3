package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/testutil/smallfs"
)

// TestFullStateDir runs jobs on a real filesystem that fills up: a job that
// ends while the state dir is full reaches a final status (failed, "state
// dir full") instead of staying running; cancel, get, list and output keep
// working; a new job is refused with ErrStateFull; once space is freed, jobs
// run again and the kept final state reaches the store.
func TestFullStateDir(t *testing.T) {
	state := smallfs.Mount(t, 4<<20)
	m, f, _ := openTest(t, func(c *Config) { c.StateDir = state })
	ctx := context.Background()

	a, err := m.Start(ctx, code("a"), "")
	if err != nil {
		t.Fatal(err)
	}
	ca := f.next(t)
	b, err := m.Start(ctx, code("b"), "")
	if err != nil {
		t.Fatal(err)
	}
	f.next(t)
	ca.stdout(t, "before the disk filled\n")

	free := smallfs.Fill(t, state)
	ca.stdout(t, strings.Repeat("x", 256<<10)) // cannot all be written
	ca.exit(t, 0)
	done := waitDone(t, m, a.ID)
	if done.Status != StatusFailed || !strings.Contains(done.Error, MsgStateFull) {
		t.Fatalf("job that ended on a full state dir: %s %q", done.Status, done.Error)
	}
	if got, err := m.Get(ctx, a.ID); err != nil || got.Status != StatusFailed {
		t.Fatalf("Get after the end: %v %v", got.Status, err)
	}
	if ch, err := m.Output(ctx, a.ID, Cursor{}); err != nil || !strings.HasPrefix(ch.Stdout, "before the disk filled\n") || !ch.Done {
		t.Fatalf("output kept so far: %q done=%v err=%v", ch.Stdout[:min(len(ch.Stdout), 40)], ch.Done, err)
	}

	// Cancel still stops a running job, and answers for the finished one.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if j, err := m.Cancel(cctx, b.ID); err != nil || j.Status != StatusCancelled {
		t.Fatalf("cancel on a full state dir: %v %v", j.Status, err)
	}
	if j, err := m.Cancel(cctx, a.ID); err != nil || j.Status != StatusFailed {
		t.Fatalf("cancel of the finished job: %v %v", j.Status, err)
	}
	l, err := m.List(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range l.Jobs {
		if !j.Status.Terminal() {
			t.Fatalf("list shows %s as %s", j.ID, j.Status)
		}
	}
	if _, err := m.Start(ctx, code("c"), ""); !errors.Is(err, ErrStateFull) || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("start on a full state dir: %v", err)
	}

	free()
	d, err := m.Start(ctx, code("d"), "")
	if err != nil {
		t.Fatalf("start after freeing space: %v", err)
	}
	cd := f.next(t)
	cd.stdout(t, "ok\n")
	cd.exit(t, 0)
	if j := waitDone(t, m, d.ID); j.Status != StatusCompleted {
		t.Fatalf("job after freeing space: %s %q", j.Status, j.Error)
	}
	// The final state of a is in the store (saved at once, or now by the
	// retry, which the test runs instead of waiting for its ticker).
	m.saveUnsaved()
	if j, err := m.store.get(ctx, a.ID); err != nil || j.Status != StatusFailed {
		t.Fatalf("stored state of a: %v %v", j.Status, err)
	}
}

// TestUnsavedFinalState: when the store refuses a job's final state, the job
// is still seen as finished (never running) by Get, List, Output and Cancel.
func TestUnsavedFinalState(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx := context.Background()
	j, err := m.Start(ctx, code("x"), "")
	if err != nil {
		t.Fatal(err)
	}
	c := f.next(t)
	c.stdout(t, "hi\n")
	// The store stops taking writes (as a full disk would have it).
	if _, err := m.store.(*store).w.ExecContext(ctx, `PRAGMA query_only = 1`); err != nil {
		t.Fatal(err)
	}
	c.exit(t, 0)
	done := waitDone(t, m, j.ID)
	if done.Status != StatusFailed || !strings.Contains(done.Error, "final state could not be saved") {
		t.Fatalf("unsaved job: %s %q", done.Status, done.Error)
	}
	if stored, _ := m.store.get(ctx, j.ID); stored.Status != StatusRunning {
		t.Fatalf("the store should still say running (write refused), says %s", stored.Status)
	}
	for _, st := range []Status{"", StatusRunning} {
		l, err := m.List(ctx, Filter{Status: st})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range l.Jobs {
			if x.ID == j.ID && x.Status != StatusFailed {
				t.Fatalf("List(%q) shows the unsaved job as %s", st, x.Status)
			}
		}
		if st == StatusRunning && len(l.Jobs) != 0 {
			t.Fatalf("List(running) = %v", l.Jobs)
		}
	}
	if got, err := m.Cancel(ctx, j.ID); err != nil || got.Status != StatusFailed {
		t.Fatalf("cancel: %v %v", got.Status, err)
	}
	if ch, err := m.Output(ctx, j.ID, Cursor{}); err != nil || ch.Stdout != "hi\n" || !ch.Done {
		t.Fatalf("output: %+v %v", ch, err)
	}
	// Writes allowed again: the retry saves it.
	if _, err := m.store.(*store).w.ExecContext(ctx, `PRAGMA query_only = 0`); err != nil {
		t.Fatal(err)
	}
	m.saveUnsaved() // what the retry ticker does
	if m.lookupUnsaved(j.ID) != nil {
		t.Fatal("the final state was not saved")
	}
	if stored, err := m.store.get(ctx, j.ID); err != nil || stored.Status != StatusFailed {
		t.Fatalf("stored: %v %v", stored.Status, err)
	}
}

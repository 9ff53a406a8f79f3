package jobs

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRunSyncFinishesWithinBudget(t *testing.T) {
	m, f, _ := openTest(t, nil)
	got := make(chan SyncOutcome, 1)
	go func() {
		out, err := m.RunSync(context.Background(), code("x"), SyncOptions{Budget: time.Hour, Label: "quick"})
		if err != nil {
			t.Error(err)
		}
		got <- out
	}()
	c := f.next(t)
	c.stdout(t, "hi\n")
	c.exit(t, 0)
	out := <-got
	if out.HandedOff() || out.Result.ExitCode != 0 || out.Job.Status != StatusCompleted || out.Job.Label != "quick" {
		t.Fatalf("outcome = %+v", out)
	}
}

func TestRunSyncHandsOffAndJobLivesOn(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan SyncOutcome, 1)
	var events int
	go func() {
		out, err := m.RunSync(ctx, code("x"), SyncOptions{Budget: 50 * time.Millisecond, OnEvent: func(Event) { events++ }})
		if err != nil {
			t.Error(err)
		}
		got <- out
	}()
	c := f.next(t)
	c.stdout(t, "partial\n")
	out := <-got // the fake never ends by itself, so the budget runs out
	cancel()     // the caller is gone; the job must not care
	if !out.HandedOff() || out.Output == nil || out.Job.Status != StatusRunning {
		t.Fatalf("outcome = %+v", out)
	}
	c.stdout(t, "rest\n")
	c.exit(t, 0)
	if why := <-c.ended; why != "exit" {
		t.Fatalf("handed-off run ended by %q", why)
	}
	rest, err := m.Output(context.Background(), out.Job.ID, Cursor{StdoutOffset: out.Output.StdoutOffset, StderrOffset: out.Output.StderrOffset, Wait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for !rest.Done {
		more, err := m.Output(context.Background(), out.Job.ID, Cursor{StdoutOffset: rest.StdoutOffset, Wait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		more.Stdout = rest.Stdout + more.Stdout
		rest = more
	}
	if all := out.Output.Stdout + rest.Stdout; all != "partial\nrest\n" {
		t.Fatalf("handoff output + later reads = %q, want every byte exactly once", all)
	}
	if j := waitDone(t, m, out.Job.ID); j.Status != StatusCompleted {
		t.Fatalf("job = %s", j.Status)
	}
}

func TestRunSyncCallerCancelKillsRun(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	var out SyncOutcome
	go func() {
		var err error
		out, err = m.RunSync(ctx, code("x"), SyncOptions{Budget: time.Hour})
		errc <- err
	}()
	c := f.next(t)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if why := <-c.ended; why != "cancelled" {
		t.Fatalf("run ended by %q", why)
	}
	if out.Job.Status != StatusCancelled {
		t.Fatalf("job = %+v", out.Job)
	}
}

func TestRunSyncReturnsRunError(t *testing.T) {
	m, f, _ := openTest(t, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := m.RunSync(context.Background(), code("x"), SyncOptions{})
		errc <- err
	}()
	f.next(t).do(t, fakeStep{err: errors.New("bad interpreter")})
	if err := <-errc; err == nil || err.Error() != "bad interpreter" {
		t.Fatalf("err = %v", err)
	}
}

func TestRunSyncEphemeralLeavesNoJob(t *testing.T) {
	m, f, _ := openTest(t, nil)
	started := make(chan Job, 1)
	got := make(chan SyncOutcome, 1)
	go func() {
		out, _ := m.RunSync(context.Background(), code("x"), SyncOptions{Ephemeral: true, OnStart: func(j Job) { started <- j }})
		got <- out
	}()
	j := <-started
	f.next(t).exit(t, 0)
	out := <-got
	if out.Result == nil || out.Job.ID != j.ID {
		t.Fatalf("outcome = %+v", out)
	}
	if _, err := m.store.get(context.Background(), j.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ephemeral job still stored: %v", err)
	}
}

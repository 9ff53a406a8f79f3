package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/testutil/pgtest"
)

// replicas opens n Managers on one fresh PostgreSQL database, as n
// `pyexec serve` replicas would.
func replicas(t *testing.T, n int, mod func(*Config)) ([]*Manager, []*fakeRunner) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	var ms []*Manager
	var fs []*fakeRunner
	for range n {
		m, f := openOn(t, Config{StateDir: t.TempDir(), StoreURL: url, NodeLostAfter: time.Second}, mod)
		ms, fs = append(ms, m), append(fs, f)
	}
	return ms, fs
}

// started is a run that started on replica i.
type started struct {
	i int
	c *fakeCall
}

// anyRunner merges the runners' starts into one channel for the test's
// lifetime (no start is ever dropped between two waits).
func anyRunner(t *testing.T, fs []*fakeRunner) <-chan started {
	out := make(chan started, 64)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	for i, f := range fs {
		go func() {
			for {
				select {
				case c := <-f.calls:
					out <- started{i, c}
				case <-stop:
					return
				}
			}
		}()
	}
	return out
}

func nextOf(t *testing.T, runs <-chan started) (int, *fakeCall) {
	t.Helper()
	select {
	case got := <-runs:
		return got.i, got.c
	case <-time.After(10 * time.Second):
		t.Fatal("no run started on any replica")
		return 0, nil
	}
}

func TestSharedQueueSpreadsToFreeNodes(t *testing.T) {
	ms, fs := replicas(t, 3, func(c *Config) { c.MaxConcurrent = 1 })
	runs := anyRunner(t, fs)
	ctx := context.Background()
	// All submitted on node 0, which can run one: the others take the rest.
	var calls []*fakeCall
	seen := map[int]bool{}
	for range 3 {
		if _, err := ms[0].Start(ctx, code("x"), ""); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		i, c := nextOf(t, runs)
		seen[i] = true
		calls = append(calls, c)
	}
	if len(seen) != 3 {
		t.Fatalf("jobs ran on nodes %v, want one on each of the 3 free nodes", seen)
	}
	// A fourth waits in the queue until a slot frees.
	j4, _ := ms[1].Start(ctx, code("4"), "")
	if j, _ := ms[2].Get(ctx, j4.ID); j.Status != StatusPending {
		t.Fatalf("4th job = %s, want pending while every node is full", j.Status)
	}
	calls[0].exit(t, 0)
	_, c := nextOf(t, runs)
	c.exit(t, 0)
	if j := waitDone(t, ms[2], j4.ID); j.Status != StatusCompleted {
		t.Fatalf("4th job = %+v", j)
	}
	for _, c := range calls[1:] {
		c.exit(t, 0)
	}
}

func TestSharedOutputAndCancelFromAnotherNode(t *testing.T) {
	ms, fs := replicas(t, 2, func(c *Config) { c.MaxConcurrent = 1 })
	ctx := context.Background()
	// Fill one node so the other runs the job.
	busy, _ := ms[1].Start(ctx, code("busy"), "")
	runs := anyRunner(t, fs)
	full, hold := nextOf(t, runs)
	j, _ := ms[full].Start(ctx, code("job"), "")
	ownerIdx, c := nextOf(t, runs)
	if ownerIdx == full {
		t.Fatal("the full node claimed a job")
	}
	reader := ms[full]
	got := make(chan Chunk, 1)
	go func() {
		ch, _ := reader.Output(ctx, j.ID, Cursor{Wait: 10 * time.Second})
		got <- ch
	}()
	c.stdout(t, "from node 0\n")
	select {
	case ch := <-got:
		if ch.Stdout != "from node 0\n" || ch.StdoutOffset != 12 {
			t.Fatalf("cross-node read = %+v", ch)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting reader on the other node was never woken")
	}
	events, unsub, err := reader.Subscribe(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	cj, err := reader.Cancel(ctx, j.ID)
	if err != nil || cj.Status != StatusCancelled {
		t.Fatalf("cancel from the other node = %+v, %v", cj, err)
	}
	if why := <-c.ended; why != "cancelled" {
		t.Fatalf("the run ended by %q, want its context cancelled", why)
	}
	done := false
	for ev := range events {
		done = done || ev.Done
	}
	if !done {
		t.Fatal("the other node's subscription saw no final event")
	}
	hold.exit(t, 0)
	waitDone(t, ms[0], busy.ID)
}

// TestSharedLostLeaseIsFenced makes a node's lease run out while its job
// runs (as if it had been paused past the bound): another node fails the
// job as node_lost, the paused node's run is stopped, and its late writes
// do not overwrite node_lost.
func TestSharedLostLeaseIsFenced(t *testing.T) {
	ms, fs := replicas(t, 2, nil)
	runs := anyRunner(t, fs)
	ctx := context.Background()
	j, _ := ms[0].Start(ctx, code("x"), "")
	i, c := nextOf(t, runs)
	owner, other := ms[i], ms[1-i]
	c.stdout(t, "before\n")
	// Wait for the flush, then expire the lease as a silent node's would.
	for {
		ch, err := other.Output(ctx, j.ID, Cursor{Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if ch.StdoutOffset == 7 {
			break
		}
	}
	owner.sh.paused.Store(true) // silent: no renewals
	if _, err := owner.sh.db.SQL.Exec(`UPDATE pyexec_jobs SET lease_until = now() - interval '1 second' WHERE id=$1`, j.ID); err != nil {
		t.Fatal(err)
	}
	other.sh.reap(ctx)
	got, _ := other.Get(ctx, j.ID)
	if got.Status != StatusFailed || got.Error != MsgNodeLost {
		t.Fatalf("after the lease ran out = %+v, want failed node_lost", got)
	}
	// The owner learns it at its next renewal and stops the run.
	owner.sh.paused.Store(false)
	select {
	case why := <-c.ended:
		if why != "cancelled" {
			t.Fatalf("the fenced run ended by %q", why)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the node that lost its lease kept running the job")
	}
	waitDone(t, owner, j.ID)
	got, _ = other.Get(ctx, j.ID)
	if got.Status != StatusFailed || got.Error != MsgNodeLost {
		t.Fatalf("the fenced node overwrote the result: %+v", got)
	}
	ch, err := other.Output(ctx, j.ID, Cursor{})
	if err != nil || ch.Stdout != "before\n" || !ch.Done {
		t.Fatalf("output after node_lost = %+v, %v", ch, err)
	}
	var epoch int64
	owner.sh.db.SQL.QueryRow(`SELECT epoch FROM pyexec_jobs WHERE id=$1`, j.ID).Scan(&epoch)
	if epoch != 1 {
		t.Fatalf("job claimed %d times, want once", epoch)
	}
}

// TestSharedQueuePrefersWarmEnvironment: a job needing an environment that
// one free node has built goes to that node, though another free node sees
// it first.
func TestSharedQueuePrefersWarmEnvironment(t *testing.T) {
	ms, fs := replicas(t, 2, nil)
	runs := anyRunner(t, fs)
	req := engine.Request{Code: "import six", Dependencies: []string{"six"}}
	key := envKey(req)
	warm := ms[1]
	warm.sh.rememberEnv(key)
	// What warm's membership heartbeat says (internal/cluster writes it).
	if _, err := warm.sh.db.SQL.Exec(`INSERT INTO pyexec_nodes (id, free_slots, max_slots, warm_envs) VALUES ($1, 1, 1, $2)`,
		warm.NodeID(), []string{key}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		j, err := ms[0].Start(context.Background(), req, "")
		if err != nil {
			t.Fatal(err)
		}
		i, c := nextOf(t, runs)
		if i != 1 {
			t.Fatalf("job %s needing a built environment ran on the node without it", j.ID)
		}
		c.exit(t, 0)
		waitDone(t, ms[0], j.ID)
	}
	// Without the environment anywhere, the node it reached runs it.
	j, _ := ms[0].Start(context.Background(), code("x"), "")
	if i, c := nextOf(t, runs); i != 0 {
		t.Fatalf("job %s with no environment did not run where it landed (node %d)", j.ID, i)
	} else {
		c.exit(t, 0)
	}
}

package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pyexec/pyexec/internal/pgdb"
	"github.com/pyexec/pyexec/internal/testutil/pgtest"
)

// statementsByJob counts the statements that name a job id among their
// arguments: the round trips a job costs, without the replicas' own loops
// (heartbeats, lease renewals, claims of an empty queue).
type statementsByJob struct {
	mu  sync.Mutex
	ids map[string]int
}

func (s *statementsByJob) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range d.Args {
		if id, ok := a.(string); ok && len(id) == 16 {
			s.ids[id]++
		}
	}
	return ctx
}

func (s *statementsByJob) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statementsByJob) of(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

func sharedDB(t *testing.T, url string, tr pgx.QueryTracer) *pgdb.DB {
	t.Helper()
	db, err := pgdb.Open(context.Background(), url, pgdb.Options{Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestSharedRoundTripsPerJob: a background job that prints and ends costs
// the store four statements (the queue check and insert in one, the
// running state and pid written behind as one, an output flush, the final
// state); reading it on its replica right after the end costs none,
// and another replica, asked right after the owner said the job ended,
// reads the same final state from the store.
func TestSharedRoundTripsPerJob(t *testing.T) {
	url := pgtest.NewDatabase(t)
	trA, trB := &statementsByJob{ids: map[string]int{}}, &statementsByJob{ids: map[string]int{}}
	cfg := func(db *pgdb.DB) Config {
		return Config{StateDir: t.TempDir(), DB: db, NodeLostAfter: time.Minute}
	}
	a, fa := openOn(t, cfg(sharedDB(t, url, trA)), nil)
	b, _ := openOn(t, cfg(sharedDB(t, url, trB)), nil)
	ctx := context.Background()
	const n = 10
	for i := range n {
		j, err := a.Start(ctx, code(fmt.Sprint(i)), "")
		if err != nil {
			t.Fatal(err)
		}
		c := fa.next(t)
		c.stdout(t, "out\n")
		c.exit(t, 0)
		waitDone(t, a, j.ID)
		got, err := a.Get(ctx, j.ID)
		if err != nil || got.Status != StatusCompleted || got.PID != 4242 {
			t.Fatalf("job %d on its replica: %+v, %v", i, got, err)
		}
		out, err := a.Output(ctx, j.ID, Cursor{})
		if err != nil || out.Stdout != "out\n" || !out.Done {
			t.Fatalf("output on its replica: %+v, %v", out, err)
		}
		t.Logf("job %d: %d statements", i, trA.of(j.ID))
		// Five, not four: on a loaded machine the pid may come after the
		// running state was already written (the code before cost nine).
		if k := trA.of(j.ID); k > 5 {
			t.Errorf("job %d cost %d statements, want at most 5", i, k)
		}
		// Another replica reads the store, and sees the same.
		other, err := b.Get(ctx, j.ID)
		if err != nil || other.Status != StatusCompleted || other.PID != 4242 || other.StdoutBytes != 4 {
			t.Fatalf("job %d on another replica: %+v, %v", i, other, err)
		}
		if trB.of(j.ID) == 0 {
			t.Fatalf("another replica answered job %d without reading the store", i)
		}
	}
}

// TestSharedStateWrittenBehind: a running job's state (running, its pid)
// reaches the store although nothing waits for the write.
func TestSharedStateWrittenBehind(t *testing.T) {
	ms, fs := replicas(t, 2, nil)
	ctx := context.Background()
	j, err := ms[0].Start(ctx, code("long"), "")
	if err != nil {
		t.Fatal(err)
	}
	c := fs[0].next(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		wake := ms[1].sh.waiter(j.ID)
		got, err := ms[1].Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == StatusRunning && got.PID == 4242 && got.StartedAt != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store still says %+v", got)
		}
		select { // woken by the write's notification; polled as a fallback
		case <-wake:
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.exit(t, 0)
	if got := waitDone(t, ms[0], j.ID); got.Status != StatusCompleted {
		t.Fatalf("final %+v", got)
	}
}

// TestSharedQueueBound: --max-queue counts the jobs pending across the
// replicas, checked in the statement that inserts.
func TestSharedQueueBound(t *testing.T) {
	ms, fs := replicas(t, 2, func(c *Config) { c.MaxConcurrent, c.MaxQueue = 1, 2 })
	runs := anyRunner(t, fs)
	ctx := context.Background()
	var calls []*fakeCall
	for range 2 { // one runs on each replica
		if _, err := ms[0].Start(ctx, code("run"), ""); err != nil {
			t.Fatal(err)
		}
		_, c := nextOf(t, runs)
		calls = append(calls, c)
	}
	for range 2 {
		if _, err := ms[1].Start(ctx, code("wait"), ""); err != nil {
			t.Fatal(err)
		}
	}
	_, err := ms[0].Start(ctx, code("one too many"), "")
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "2 pending across the replicas") {
		t.Fatalf("start past the shared queue's bound: %v", err)
	}
	for _, c := range calls {
		c.exit(t, 0)
	}
}

// TestSharedPruneForgetsRecent: a job that just ended here is answered
// from memory, but not once it is pruned.
func TestSharedPruneForgetsRecent(t *testing.T) {
	ms, fs := replicas(t, 1, nil)
	ctx := context.Background()
	j, err := ms[0].Start(ctx, code("x"), "")
	if err != nil {
		t.Fatal(err)
	}
	fs[0].next(t).exit(t, 0)
	waitDone(t, ms[0], j.ID)
	if _, err := ms[0].Get(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if res, err := ms[0].Prune(ctx, PruneOptions{}); err != nil || res.Removed != 1 {
		t.Fatalf("prune = %+v, %v", res, err)
	}
	if _, err := ms[0].Get(ctx, j.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after prune: %v, want ErrNotFound", err)
	}
	if _, err := ms[0].Output(ctx, j.ID, Cursor{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("output after prune: %v, want ErrNotFound", err)
	}
}

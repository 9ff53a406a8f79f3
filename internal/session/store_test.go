package session_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/session"
	"github.com/pyexec/pyexec/internal/testutil/pgtest"
)

// server is one process's sessions on a job store: a job manager (the
// store's owner) and a session manager recording into it.
type server struct {
	jobs     *jobs.Manager
	sessions *session.Manager
}

func openServer(t *testing.T, eng *engine.Engine, cfg jobs.Config) *server {
	t.Helper()
	cfg.Run = func(context.Context, engine.Request, jobs.RunOptions, engine.Observer) (engine.Result, error) {
		return engine.Result{}, errors.New("no runs here")
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	jm, err := jobs.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	sm := session.New(eng, session.Config{Store: jm.SessionStore(), Owner: jm.NodeID(), Cluster: jm.Shared()})
	s := &server{jobs: jm, sessions: sm}
	t.Cleanup(s.stop)
	return s
}

func (s *server) stop() {
	s.sessions.Shutdown()
	s.jobs.Close(context.Background())
}

func newEngine(t *testing.T) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: t.TempDir(), Warm: engine.WarmConfig{Spares: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func cell(t *testing.T, m *session.Manager, name, code string) session.CellResult {
	t.Helper()
	r, err := m.Run(context.Background(), session.RunRequest{Session: name, Code: code})
	if err != nil {
		t.Fatalf("%s in %s: %v", code, name, err)
	}
	return r
}

func lostReason(err error) string {
	var se *session.Error
	if errors.As(err, &se) && se.Kind == session.KindLost {
		return se.Reason
	}
	return ""
}

// TestRestartRecordInJobStore: a restarted server lists the sessions of
// the one before as lost (server_restarted) from the job store, reports
// each once, then the name is free.
func TestRestartRecordInJobStore(t *testing.T) {
	eng, dir := newEngine(t), t.TempDir()
	a := openServer(t, eng, jobs.Config{StateDir: dir})
	cell(t, a.sessions, "keep", "x = 1")
	a.stop()

	b := openServer(t, eng, jobs.Config{StateDir: dir})
	ctx := context.Background()
	l, err := b.sessions.List(ctx)
	if err != nil || len(l) != 1 || l[0].Name != "keep" || l[0].Status != session.StatusLost || l[0].LostReason != "server_restarted" || l[0].ExecutionCount != 1 {
		t.Fatalf("after restart: %+v, %v", l, err)
	}
	if in, err := b.sessions.Get(ctx, "keep"); err != nil || in.Status != session.StatusLost {
		t.Fatalf("get does not report the loss away: %+v, %v", in, err)
	}
	_, err = b.sessions.Run(ctx, session.RunRequest{Session: "keep", Code: "x"})
	if lostReason(err) != "server_restarted" || !strings.Contains(err.Error(), "reported once") {
		t.Fatalf("first call after restart: %v", err)
	}
	if r := cell(t, b.sessions, "keep", "'x' in globals()"); !r.SessionCreated || *r.Result != "False" {
		t.Fatalf("then a new session: %+v", r)
	}
	// A loss reported with the cell that caused it is not reported again.
	for i := range 5 {
		if r := cell(t, b.sessions, "keep", "import os\nos._exit(3)"); r.Status != session.StatusLost || r.SessionCreated != (i > 0) {
			t.Fatalf("round %d: the cell that ends the session: %+v", i, r)
		}
	}
}

// TestReplicaSessionsOnPostgres: two replicas on one store: a name is held
// by one (the other is told where), and a replica another one declared
// lost kills its session and its next caller gets node_lost.
func TestReplicaSessionsOnPostgres(t *testing.T) {
	url := pgtest.NewDatabase(t)
	eng := newEngine(t)
	a := openServer(t, eng, jobs.Config{StateDir: t.TempDir(), StoreURL: url})
	b := openServer(t, eng, jobs.Config{StateDir: t.TempDir(), StoreURL: url})
	ctx := context.Background()
	cell(t, a.sessions, "s", "x = 1")
	var ee *session.ElsewhereError
	if _, err := b.sessions.Run(ctx, session.RunRequest{Session: "s", Code: "x"}); !errors.As(err, &ee) || ee.Owner != a.jobs.NodeID() {
		t.Fatalf("a cell on another replica's session: %v; want ElsewhereError naming %s", err, a.jobs.NodeID())
	}
	if _, err := b.sessions.Create(ctx, session.CreateRequest{Session: "s"}); !errors.As(err, &ee) {
		t.Fatalf("creating a name another replica holds: %v", err)
	}
	if owner, err := b.sessions.Owner(ctx, "s"); err != nil || owner != a.jobs.NodeID() {
		t.Fatalf("owner = %q, %v", owner, err)
	}
	if l, _ := b.sessions.List(ctx); len(l) != 1 || l[0].Node != a.jobs.NodeID() {
		t.Fatalf("the other replica lists %+v", l)
	}

	cell(t, a.sessions, "idle", "1")
	// b declares a lost: a's busy session is fenced at its next record
	// write, the idle one by a's periodic check of its records.
	if n, err := b.sessions.MarkNodeLost(ctx, []string{a.jobs.NodeID()}); err != nil || n != 2 {
		t.Fatalf("mark node lost: %d, %v", n, err)
	}
	cell(t, a.sessions, "s", "x += 1") // its record write finds the session lost
	deadline := time.Now().Add(10 * time.Second)
	for a.sessions.Held("s") {
		if time.Now().After(deadline) {
			t.Fatal("the fenced session still lives on its replica")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for a.sessions.Held("idle") {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("the fenced idle session still lives on its replica")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := b.sessions.Run(ctx, session.RunRequest{Session: "s", Code: "x"})
	if lostReason(err) != session.ReasonNodeLost {
		t.Fatalf("the next call: %v; want node_lost", err)
	}
	if r := cell(t, b.sessions, "s", "'x' in globals()"); !r.SessionCreated {
		t.Fatalf("then the name is free: %+v", r)
	}
}

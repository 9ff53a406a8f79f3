package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/session"
)

func sessionRecord(name, owner string) session.Record {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return session.Record{Name: name, Owner: owner, Label: "lbl", Status: session.StatusIdle, CreatedAt: now, LastUsedAt: now,
		Settings: session.Settings{Cwd: "sub", EnvVars: map[string]string{"TOKEN": "[redacted]"}}}
}

// TestSessionStoreSuite runs the sessions table's contract against every
// store: claims, saves, the once-reported loss, and what a restart leaves.
func TestSessionStoreSuite(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, b backend)
	}{
		{"claim, save, get, list, release", func(t *testing.T, b backend) {
			m, _ := b.open(t, nil)
			st, ctx, me := m.SessionStore(), context.Background(), m.NodeID()
			rec := sessionRecord("a", me)
			if _, ok, err := st.Claim(ctx, rec); err != nil || !ok {
				t.Fatalf("first claim: %v, %v", ok, err)
			}
			have, ok, err := st.Claim(ctx, sessionRecord("a", me))
			if err != nil || ok || have.Name != "a" || have.Owner != me || !have.CreatedAt.Equal(rec.CreatedAt) {
				t.Fatalf("second claim = %+v, %v, %v; want the first one's record", have, ok, err)
			}
			rec.ExecutionCount, rec.Status, rec.PeakMemory = 3, session.StatusBusy, 1<<20
			if err := st.Save(ctx, rec); err != nil {
				t.Fatal(err)
			}
			got, ok, err := st.Get(ctx, "a")
			if err != nil || !ok || got.ExecutionCount != 3 || got.Status != session.StatusBusy || got.PeakMemory != 1<<20 ||
				got.Settings.Cwd != "sub" || got.Settings.EnvVars["TOKEN"] != "[redacted]" || got.Label != "lbl" {
				t.Fatalf("get = %+v, %v, %v", got, ok, err)
			}
			if _, ok, _ := st.Claim(ctx, sessionRecord("b", me)); !ok {
				t.Fatal("claim b")
			}
			l, err := st.List(ctx)
			if err != nil || len(l) != 2 || l[0].Name != "a" || l[1].Name != "b" {
				t.Fatalf("list = %+v, %v", l, err)
			}
			if gone, err := st.Release(ctx, "a", me); err != nil || !gone {
				t.Fatalf("release = %v, %v", gone, err)
			}
			if gone, err := st.Release(ctx, "a", me); err != nil || gone {
				t.Fatalf("second release = %v, %v; want nothing left", gone, err)
			}
			if _, ok, _ := st.Get(ctx, "a"); ok {
				t.Fatal("released record still there")
			}
		}},
		{"marked lost: saves refused, reported by record", func(t *testing.T, b backend) {
			m, _ := b.open(t, nil)
			st, ctx, me := m.SessionStore(), context.Background(), m.NodeID()
			rec := sessionRecord("x", me)
			st.Claim(ctx, rec)
			if n, err := st.MarkLost(ctx, []string{me}, session.ReasonNodeLost, "gone"); err != nil || n != 1 {
				t.Fatalf("mark lost = %d, %v", n, err)
			}
			if n, _ := st.MarkLost(ctx, []string{me}, session.ReasonNodeLost, "gone"); n != 0 {
				t.Fatalf("marking twice changed %d records", n)
			}
			if err := st.Save(ctx, rec); !errors.Is(err, session.ErrNotOwned) {
				t.Fatalf("save of a lost session: %v, want ErrNotOwned (the session is fenced)", err)
			}
			got, _, _ := st.Get(ctx, "x")
			if got.Status != session.StatusLost || got.LostReason != session.ReasonNodeLost || got.LostDetail != "gone" {
				t.Fatalf("lost record = %+v", got)
			}
		}},
		{"a restart leaves the sessions lost", func(t *testing.T, b backend) {
			m, _ := b.open(t, nil)
			ctx := context.Background()
			m.SessionStore().Claim(ctx, sessionRecord("kept", m.NodeID()))
			// What session.Manager.Shutdown records; SQLite also takes over
			// the open sessions of a process that died without it.
			if b.name == "postgres" {
				m.SessionStore().MarkLost(ctx, []string{m.NodeID()}, "server_restarted", sessionRestarted)
			}
			m.Close(ctx)
			m2, _ := b.open(t, nil)
			got, ok, err := m2.SessionStore().Get(ctx, "kept")
			if err != nil || !ok || got.Status != session.StatusLost || got.LostReason != "server_restarted" {
				t.Fatalf("after restart = %+v, %v, %v", got, ok, err)
			}
			if b.name == "sqlite" && got.Owner != m2.NodeID() {
				t.Fatalf("the new process did not take the record over: owner %s, want %s", got.Owner, m2.NodeID())
			}
			if gone, _ := m2.SessionStore().Release(ctx, "kept", got.Owner); !gone {
				t.Fatal("release after restart")
			}
		}},
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, b) })
			}
		})
	}
}

// TestSessionClaimAcrossReplicas: two replicas claiming one name at once
// on PostgreSQL: exactly one wins, the other sees the winner's record.
func TestSessionClaimAcrossReplicas(t *testing.T) {
	b := backends(t)[1]
	a, _ := b.open(t, nil)
	c, _ := b.open(t, nil)
	ctx := context.Background()
	type res struct {
		have session.Record
		ok   bool
		err  error
	}
	out := make(chan res, 2)
	for _, m := range []*Manager{a, c} {
		go func() {
			h, ok, err := m.SessionStore().Claim(ctx, sessionRecord("shared", m.NodeID()))
			out <- res{h, ok, err}
		}()
	}
	r1, r2 := <-out, <-out
	if r1.err != nil || r2.err != nil || r1.ok == r2.ok {
		t.Fatalf("claims = %+v, %+v; want exactly one winner", r1, r2)
	}
	loser := r1
	if r1.ok {
		loser = r2
	}
	got, _, _ := a.SessionStore().Get(ctx, "shared")
	if loser.have.Owner != got.Owner || got.Owner == "" {
		t.Fatalf("the loser saw owner %q, the store says %q", loser.have.Owner, got.Owner)
	}
	if n, err := c.SessionStore().MarkLost(ctx, []string{got.Owner}, session.ReasonNodeLost, "x"); err != nil || n != 1 {
		t.Fatalf("another replica marks the owner's sessions lost: %d, %v", n, err)
	}
}

// TestSessionStoreSQLiteKilledOwner: a process that died without shutting
// down (its owner lock free) leaves open records; the next one takes them
// over as lost.
func TestSessionStoreSQLiteKilledOwner(t *testing.T) {
	dir := t.TempDir()
	m, _ := openOn(t, Config{StateDir: dir}, nil)
	ctx := context.Background()
	st := m.SessionStore()
	st.Claim(ctx, sessionRecord("open", m.NodeID()))
	// A second live process keeps its own names.
	other, _ := openOn(t, Config{StateDir: dir}, nil)
	if _, ok, err := other.SessionStore().Claim(ctx, sessionRecord("open", other.NodeID())); err != nil || !ok {
		t.Fatalf("a live process sharing the state dir could not use the name: %v, %v", ok, err)
	}
	if err := other.recoverOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := st.Get(ctx, "open"); got.Status != session.StatusIdle {
		t.Fatalf("a live owner's session was touched: %+v", got)
	}
	// Simulate the SIGKILL: the lock goes (the kernel drops it), the rows stay.
	m.lockFile.Close()
	fresh, _ := openOn(t, Config{StateDir: dir}, nil)
	got, ok, err := fresh.SessionStore().Get(ctx, "open")
	if err != nil || !ok || got.Status != session.StatusLost || got.LostReason != "server_restarted" {
		t.Fatalf("after the owner died = %+v, %v, %v", got, ok, err)
	}
}

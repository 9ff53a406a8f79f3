package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/testutil/pgtest"
)

// backend opens Managers on one store: SQLite in a state dir, or a fresh
// PostgreSQL database. Opening twice reopens the same store (a restart).
type backend struct {
	name string
	open func(t *testing.T, mod func(*Config)) (*Manager, *fakeRunner)
}

func backends(t *testing.T) []backend {
	sqliteDir := map[*testing.T]string{}
	pgURL := map[*testing.T]string{}
	return []backend{
		{"sqlite", func(t *testing.T, mod func(*Config)) (*Manager, *fakeRunner) {
			if sqliteDir[t] == "" {
				sqliteDir[t] = t.TempDir()
			}
			return openOn(t, Config{StateDir: sqliteDir[t]}, mod)
		}},
		{"postgres", func(t *testing.T, mod func(*Config)) (*Manager, *fakeRunner) {
			if pgURL[t] == "" {
				pgURL[t] = pgtest.NewDatabase(t)
			}
			return openOn(t, Config{StateDir: t.TempDir(), StoreURL: pgURL[t], NodeLostAfter: 2 * time.Second}, mod)
		}},
	}
}

func openOn(t *testing.T, cfg Config, mod func(*Config)) (*Manager, *fakeRunner) {
	t.Helper()
	f := newFake()
	cfg.Run, cfg.Logger, cfg.NotifyInterval = f.run, quietLogger(), time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	m, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Close(ctx)
	})
	return m, f
}

// TestStoreSuite runs the same job lifecycle against every store: what a
// client sees must not depend on where the jobs are kept.
func TestStoreSuite(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, b backend)
	}{
		{"lifecycle, output and list", func(t *testing.T, b backend) {
			m, f := b.open(t, nil)
			ctx := context.Background()
			req := engine.Request{Code: "x", EnvVars: map[string]string{"TOKEN": "secret"}}
			j, err := m.Start(ctx, req, "lbl")
			if err != nil {
				t.Fatal(err)
			}
			c := f.next(t)
			if c.req.EnvVars["TOKEN"] != "secret" {
				t.Fatalf("the run got env %v, want the real value", c.req.EnvVars)
			}
			c.stdout(t, "héllo\n")
			c.stderr(t, "warn\n")
			c.exit(t, 3)
			got := waitDone(t, m, j.ID)
			if got.Status != StatusFailed || got.ExitCode == nil || *got.ExitCode != 3 || got.StdoutBytes != 7 || got.StderrBytes != 5 {
				t.Fatalf("final job = %+v", got)
			}
			if got.Progress != nil {
				t.Fatalf("a job that reported no progress has progress %+v", got.Progress)
			}
			if got.Request == nil || got.Request.EnvVars["TOKEN"] != "[redacted]" {
				t.Fatalf("stored request = %+v, want env values redacted", got.Request)
			}
			ch, err := m.Output(ctx, j.ID, Cursor{})
			if err != nil || ch.Stdout != "héllo\n" || ch.Stderr != "warn\n" || !ch.Done || ch.StdoutOffset != 7 {
				t.Fatalf("output = %+v, %v", ch, err)
			}
			ch, err = m.Output(ctx, j.ID, Cursor{StdoutOffset: 1, StderrOffset: 5, MaxBytes: 1})
			if err != nil || ch.Stdout != "é" || ch.StdoutOffset != 3 || ch.Stderr != "" {
				t.Fatalf("partial output = %+v, %v (a chunk never splits a character)", ch, err)
			}
			if _, err := m.Start(ctx, code("y"), "other"); err != nil {
				t.Fatal(err)
			}
			f.next(t).exit(t, 0)
			l, err := m.List(ctx, Filter{Label: "lbl"})
			if err != nil || l.Total != 1 || len(l.Jobs) != 1 || l.Jobs[0].ID != j.ID {
				t.Fatalf("list by label = %+v, %v", l, err)
			}
			l, err = m.List(ctx, Filter{Limit: 1})
			if err != nil || l.Total != 2 || len(l.Jobs) != 1 || l.Jobs[0].Label != "other" {
				t.Fatalf("list newest first = %+v, %v", l, err)
			}
			if _, err := m.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("unknown job: %v", err)
			}
		}},
		{"cancel running and pending", func(t *testing.T, b backend) {
			m, f := b.open(t, func(c *Config) { c.MaxConcurrent = 1 })
			ctx := context.Background()
			a, _ := m.Start(ctx, code("a"), "")
			c := f.next(t)
			p, err := m.Start(ctx, code("b"), "")
			if err != nil {
				t.Fatal(err)
			}
			j, err := m.Cancel(ctx, p.ID)
			if err != nil || j.Status != StatusCancelled {
				t.Fatalf("cancel pending = %+v, %v", j, err)
			}
			j, err = m.Cancel(ctx, a.ID)
			if err != nil || j.Status != StatusCancelled || <-c.ended != "cancelled" {
				t.Fatalf("cancel running = %+v, %v", j, err)
			}
			if j, _ := m.Get(ctx, a.ID); j.Status != StatusCancelled || j.Error != MsgCancelled {
				t.Fatalf("stored after cancel = %+v", j)
			}
		}},
		{"prune", func(t *testing.T, b backend) {
			m, f := b.open(t, nil)
			ctx := context.Background()
			ok, _ := m.Start(ctx, code("a"), "")
			f.next(t).exit(t, 0)
			waitDone(t, m, ok.ID)
			bad, _ := m.Start(ctx, code("b"), "")
			f.next(t).exit(t, 1)
			waitDone(t, m, bad.ID)
			res, err := m.Prune(ctx, PruneOptions{KeepFailed: true})
			if err != nil || res.Removed != 1 || res.Remaining != 1 {
				t.Fatalf("prune = %+v, %v", res, err)
			}
			if _, err := m.Get(ctx, ok.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("pruned job still there: %v", err)
			}
		}},
		{"ephemeral sync run leaves nothing", func(t *testing.T, b backend) {
			m, f := b.open(t, nil)
			go func() { c := f.next(t); c.stdout(t, "hi\n"); c.exit(t, 0) }()
			out, err := m.RunSync(context.Background(), code("x"), SyncOptions{Budget: 10 * time.Second, Ephemeral: true})
			if err != nil || out.Result == nil {
				t.Fatalf("sync = %+v, %v", out, err)
			}
			if n, err := m.store.count(context.Background()); err != nil || n != 0 {
				t.Fatalf("jobs left = %d, %v", n, err)
			}
		}},
		{"reopened store keeps finished jobs and output", func(t *testing.T, b backend) {
			m, f := b.open(t, nil)
			ctx := context.Background()
			j, _ := m.Start(ctx, code("a"), "keep")
			c := f.next(t)
			c.stdout(t, strings.Repeat("x", 1000)+"\n")
			c.exit(t, 0)
			waitDone(t, m, j.ID)
			m.Close(ctx)
			m2, _ := b.open(t, nil)
			got, err := m2.Get(ctx, j.ID)
			if err != nil || got.Status != StatusCompleted || got.Label != "keep" {
				t.Fatalf("after reopen = %+v, %v", got, err)
			}
			ch, err := m2.Output(ctx, j.ID, Cursor{StdoutOffset: 990})
			if err != nil || ch.Stdout != "xxxxxxxxxx\n" || !ch.Done {
				t.Fatalf("output after reopen = %+v, %v", ch, err)
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

package jobs

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// TestEphemeralRunLeavesNothingOnDisk: a synchronous run that ends within
// its budget with little output never reaches the store or the disk.
func TestEphemeralRunLeavesNothingOnDisk(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { testEphemeralLeavesNothing(t, b) })
	}
}

func testEphemeralLeavesNothing(t *testing.T, b backend) {
	var cfg Config
	m, f := b.open(t, func(c *Config) { cfg = *c })
	got := make(chan SyncOutcome, 1)
	go func() {
		out, err := m.RunSync(context.Background(), code("x"), SyncOptions{Budget: time.Hour, Ephemeral: true, SpillAt: 100})
		if err != nil {
			t.Error(err)
		}
		got <- out
	}()
	c := f.next(t)
	c.stdout(t, "small\n")
	c.exit(t, 0)
	out := <-got
	if out.Kept || out.Result == nil {
		t.Fatalf("outcome = %+v", out)
	}
	if l, err := m.List(context.Background(), Filter{}); err != nil || l.Total != 0 {
		t.Fatalf("list = %+v, %v", l, err)
	}
	if _, err := os.Stat(jobDir(cfg.StateDir, out.Job.ID)); !os.IsNotExist(err) {
		t.Fatalf("job dir exists: %v", err)
	}
}

// TestEphemeralRunKeptWhenOutputOutgrowsSpill: past SpillAt, the run is
// kept with its whole output, readable by cursor after the call returned
// (on a shared store, by every replica).
func TestEphemeralRunKeptWhenOutputOutgrowsSpill(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { testEphemeralKept(t, b) })
	}
}

func testEphemeralKept(t *testing.T, b backend) {
	for _, tc := range []struct {
		name    string
		spillAt int64
		keep    func(engine.Result) bool
		out     []string
	}{
		{"spill", 10, nil, []string{"0123456789\n", "abcdefghij\n", "last line\n"}},
		{"keep", 0, func(r engine.Result) bool { return r.ExitCode == 3 }, []string{"short\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, f := b.open(t, nil)
			got := make(chan SyncOutcome, 1)
			go func() {
				out, err := m.RunSync(context.Background(), code("x"), SyncOptions{Budget: time.Hour, Ephemeral: true, SpillAt: tc.spillAt, Keep: tc.keep})
				if err != nil {
					t.Error(err)
				}
				got <- out
			}()
			c := f.next(t)
			for _, s := range tc.out {
				c.stdout(t, s)
			}
			c.exit(t, 3)
			out := <-got
			if !out.Kept || out.Result == nil {
				t.Fatalf("outcome = %+v", out)
			}
			ch, err := m.Output(context.Background(), out.Job.ID, Cursor{})
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.Join(tc.out, ""); ch.Stdout != want || !ch.Done {
				t.Fatalf("kept output = %q (done %v), want %q", ch.Stdout, ch.Done, want)
			}
			j, err := m.Get(context.Background(), out.Job.ID)
			if err != nil || j.Status != StatusFailed || j.ExitCode == nil || *j.ExitCode != 3 || j.StartedAt == nil {
				t.Fatalf("kept job = %+v, %v", j, err)
			}
			if b.name == "postgres" {
				other, _ := b.open(t, nil) // another replica on the same database
				ch, err := other.Output(context.Background(), out.Job.ID, Cursor{})
				if want := strings.Join(tc.out, ""); err != nil || ch.Stdout != want || !ch.Done {
					t.Fatalf("kept output read by another replica = %q (done %v), %v; want %q", ch.Stdout, ch.Done, err, want)
				}
			}
		})
	}
}

// TestEphemeralHandoffKeepsOutputSoFar: at the handoff a lazy job is
// written out with what it printed so far.
func TestEphemeralHandoffKeepsOutputSoFar(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { testEphemeralHandoff(t, b) })
	}
}

func testEphemeralHandoff(t *testing.T, b backend) {
	m, f := b.open(t, nil)
	got := make(chan SyncOutcome, 1)
	go func() {
		out, err := m.RunSync(context.Background(), code("x"), SyncOptions{Budget: 100 * time.Millisecond, Ephemeral: true, SpillAt: 1 << 20})
		if err != nil {
			t.Error(err)
		}
		got <- out
	}()
	c := f.next(t)
	c.stdout(t, "so far\n")
	out := <-got
	if !out.HandedOff() || out.Output == nil || out.Output.Stdout != "so far\n" {
		t.Fatalf("handoff = %+v", out.Output)
	}
	c.stdout(t, "rest\n")
	c.exit(t, 0)
	waitDone(t, m, out.Job.ID)
	ch, err := m.Output(context.Background(), out.Job.ID, Cursor{})
	if err != nil || ch.Stdout != "so far\nrest\n" {
		t.Fatalf("output = %q, %v", ch.Stdout, err)
	}
}

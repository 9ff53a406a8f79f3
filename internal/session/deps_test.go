package session

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/testutil/pyinterp"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// A session created with dependencies runs in their cached environment
// (hermetic wheels, no index).
func TestSessionDependencies(t *testing.T) {
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	e, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: t.TempDir(), Python: pyinterp.Real(t),
		Deps: engine.DepsConfig{Index: uvenv.IndexSettings{NoIndex: true, Offline: true, FindLinks: []string{wheels.Dir(t)}}}})
	if err != nil {
		t.Fatal(err)
	}
	m := New(e, Config{})
	t.Cleanup(func() { m.Shutdown(); e.Close() })
	r := runCell(t, m, "deps", "import pyexec_alpha\npyexec_alpha.__version__")
	if r.Error == nil {
		t.Fatalf("a session without dependencies imported pyexec_alpha: %+v", r)
	}
	if _, err := m.Create(context.Background(), CreateRequest{Session: "withdeps", Settings: Settings{Dependencies: []string{"pyexec-beta"}}}); err != nil {
		t.Fatal(err)
	}
	r = runCell(t, m, "withdeps", "import pyexec_alpha\npyexec_alpha.NAME")
	if r.Result == nil || *r.Result != "'pyexec_alpha'" {
		t.Fatalf("with dependencies: %+v", r)
	}
}

// Cancelling the call (an MCP request cancelled) interrupts the cell and
// keeps the session.
func TestSessionCancelledCall(t *testing.T) {
	m, _ := newManager(t, Config{})
	runCell(t, m, "c", "v = 1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan CellResult, 1)
	go func() {
		r, _ := m.Run(ctx, RunRequest{Session: "c", Code: "import time\nprint('in', flush=True)\nwhile True: time.sleep(0.01)", Timeout: 120})
		done <- r
	}()
	for {
		in, _ := m.Get(context.Background(), "c")
		if in.Status == StatusBusy {
			break
		}
	}
	cancel()
	var r CellResult
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the cancelled cell never returned")
	}
	if !r.Interrupted || r.Status != StatusIdle {
		// The cancel can reach the cell before its first instruction: then
		// SIGINT is ignored and the grace kills the session instead.
		if r.Status != StatusLost || r.LostReason != reasonInterruptFailed {
			t.Fatalf("cancelled cell: %+v", r)
		}
		return
	}
	if r := runCell(t, m, "c", "v"); *r.Result != "1" {
		t.Fatalf("after cancel: %+v", r)
	}
}

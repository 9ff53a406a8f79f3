package session

import (
	"context"
	"fmt"
	"os"
	"strings"
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

// Packages mid-session: dependencies on a later call are installed into
// the session's own overlay and imported at once, with the namespace kept;
// `pip install` in a cell installs there too; the cached environment the
// session started in is never written; under network deny an install
// that needs the network says the network is denied.
func TestSessionPackagesMidSession(t *testing.T) {
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
	ctx := context.Background()

	if _, err := m.Create(ctx, CreateRequest{Session: "mid", Settings: Settings{Dependencies: []string{"pyexec-alpha==1.0"}}}); err != nil {
		t.Fatal(err)
	}
	runCell(t, m, "mid", "x = 41")
	r, err := m.Run(ctx, RunRequest{Session: "mid", Code: "import pyexec_beta, pyexec_alpha\nx += 1\n(x, pyexec_beta.NAME)", Settings: Settings{Dependencies: []string{"pyexec-alpha==1.0", "pyexec-beta"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != nil || r.Result == nil || *r.Result != "(42, 'pyexec_beta')" || fmt.Sprint(r.Installed) != "[pyexec-beta]" {
		t.Fatalf("dependencies mid-session: %+v (error %+v)", r, r.Error)
	}
	// Asked again: nothing to install.
	r, err = m.Run(ctx, RunRequest{Session: "mid", Code: "x", Settings: Settings{Dependencies: []string{"pyexec-beta"}}})
	if err != nil || len(r.Installed) != 0 || *r.Result != "42" {
		t.Fatalf("second call with the same dependencies: %+v, %v", r, err)
	}

	// pip inside the session: the shim on PATH, and python -m pip.
	r = runCell(t, m, "mid", "import subprocess, sys\n"+
		"p = subprocess.run(['pip', 'install', 'pyexec-tool'], capture_output=True, text=True)\n"+
		"print(p.returncode, p.stderr[-300:])\n"+
		"import pyexec_tool\npyexec_tool.NAME")
	if r.Error != nil || r.Result == nil || *r.Result != "'pyexec_tool'" {
		t.Fatalf("pip install in a cell: %+v (error %+v)", r, r.Error)
	}

	// The cached environment is untouched: a new session with the same
	// creation dependencies has neither package.
	if _, err := m.Create(ctx, CreateRequest{Session: "fresh", Settings: Settings{Dependencies: []string{"pyexec-alpha==1.0"}}}); err != nil {
		t.Fatal(err)
	}
	r = runCell(t, m, "fresh", "import importlib.util\n(importlib.util.find_spec('pyexec_beta'), importlib.util.find_spec('pyexec_tool'))")
	if r.Result == nil || *r.Result != "(None, None)" {
		t.Fatalf("the shared environment was written: %+v", r)
	}

	// Network denied: a package the local wheels do not have.
	if _, err := m.Create(ctx, CreateRequest{Session: "offline", Settings: Settings{Network: "deny"}}); err != nil {
		t.Fatal(err)
	}
	_, err = m.Run(ctx, RunRequest{Session: "offline", Code: "1", Settings: Settings{Dependencies: []string{"pyexec-nowhere"}}})
	if err == nil || !strings.Contains(err.Error(), "network is denied") || !strings.Contains(err.Error(), "dependencies") {
		t.Fatalf("install under network deny: %v", err)
	}
	if r := runCell(t, m, "offline", "2"); r.Result == nil || *r.Result != "2" {
		t.Fatalf("the session after a failed install: %+v", r)
	}
	r = runCell(t, m, "offline", "import subprocess\np = subprocess.run(['pip', 'install', 'pyexec-nowhere'], capture_output=True, text=True)\n(p.returncode != 0, 'network is denied' in p.stderr)")
	if r.Result == nil || *r.Result != "(True, True)" {
		t.Fatalf("pip under network deny: %+v", r)
	}
}

// A session in a named environment (env_create) uses its packages, a later
// call may not switch environments, and later dependencies go into the
// session's overlay on top of it.
func TestSessionNamedEnvironment(t *testing.T) {
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
	ctx := context.Background()
	if _, err := e.CreateNamedEnv(ctx, "analysis", engine.EnvSpec{Dependencies: []string{"pyexec-alpha==2.0"}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, CreateRequest{Session: "named", Settings: Settings{Env: "nowhere"}}); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Fatalf("a session in a missing named environment: %v", err)
	}
	r, err := m.Run(ctx, RunRequest{Session: "named", Code: "import pyexec_alpha\npyexec_alpha.__version__", Settings: Settings{Env: "analysis"}})
	if err != nil || r.Result == nil || *r.Result != "'2.0'" || !r.SessionCreated {
		t.Fatalf("cell in the named environment: %+v, %v", r, err)
	}
	if _, err := m.Run(ctx, RunRequest{Session: "named", Code: "1", Settings: Settings{Env: "other"}}); err == nil || !strings.Contains(err.Error(), "env") {
		t.Fatalf("switching environments: %v", err)
	}
	r, err = m.Run(ctx, RunRequest{Session: "named", Code: "import pyexec_tool\npyexec_tool.NAME", Settings: Settings{Dependencies: []string{"pyexec-tool"}}})
	if err != nil || r.Result == nil || *r.Result != "'pyexec_tool'" {
		t.Fatalf("dependencies over a named environment: %+v, %v", r, err)
	}
	in, _ := m.Get(ctx, "named")
	if in.Settings.Env != "analysis" || fmt.Sprint(in.Installed) != "[pyexec-tool]" {
		t.Fatalf("info: %+v", in)
	}
}

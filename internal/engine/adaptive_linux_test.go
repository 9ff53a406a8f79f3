package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/testutil/pyinterp"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// importedIn makes a module that remembers which process imported it, after
// taking ms to import.
func importedIn(ms int, extra string) map[string]string {
	return map[string]string{"__init__.py": fmt.Sprintf("import os, time\ntime.sleep(%d / 1000)\nIMPORTED_IN = os.getpid()\n%s", ms, extra)}
}

// autoEngine is an engine with adaptive preload on (learning from 2 of the
// last 4 runs) whose environments come from hermetic test wheels.
func autoEngine(t *testing.T, pkgs ...wheels.Package) *Engine {
	t.Helper()
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	dir := wheels.Dir(t, pkgs...)
	python := pyinterp.Real(t)
	e, _ := newTestEngine(t, func(c *Config) {
		c.Python = python
		c.Deps.Index = uvenv.IndexSettings{NoIndex: true, FindLinks: []string{dir}, Offline: true}
		c.Warm = WarmConfig{Spares: 1, wait: true, Auto: &AutoPreload{Window: 4, Hits: 2}}
	})
	return e
}

// awaitReplacements waits until no adaptive replacement is starting.
func awaitReplacements(t *testing.T, e *Engine) {
	t.Helper()
	for {
		e.warm.mu.Lock()
		var r *zygote
		for _, a := range e.warm.auto {
			if a.starting != nil {
				r = a.starting
			}
		}
		e.warm.mu.Unlock()
		if r == nil {
			return
		}
		select {
		case <-r.ready:
		case <-r.dead:
		}
		// replaced() runs right after: take the lock it takes.
		e.warm.mu.Lock()
		e.warm.mu.Unlock()
	}
}

func preloadOf(e *Engine, interp string) (InterpreterPreloadStat, bool) {
	st := e.WarmStats().Preload
	if st == nil {
		return InterpreterPreloadStat{}, false
	}
	for _, s := range st.PerPython {
		if s.Interpreter == interp {
			return s, true
		}
	}
	return InterpreterPreloadStat{}, false
}

// TestAdaptivePreload: a costly module two runs imported is imported by the
// zygote that serves the next runs (in a uv environment, so per
// environment); one that starts a thread at import and one that is cheap are
// excluded with the reason; the runs' output is unchanged throughout.
func TestAdaptivePreload(t *testing.T) {
	e := autoEngine(t,
		wheels.Package{Name: "pyexec-slow", Version: "1.0", Files: importedIn(60, "")},
		wheels.Package{Name: "pyexec-cheap", Version: "1.0", Files: importedIn(0, "")},
		wheels.Package{Name: "pyexec-threads", Version: "1.0", Files: importedIn(40, "import threading\nthreading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n")},
	)
	deps := []string{"pyexec-slow", "pyexec-cheap", "pyexec-threads"}
	code := "import os, pyexec_slow, pyexec_cheap, pyexec_threads\nprint('slow preloaded' if pyexec_slow.IMPORTED_IN != os.getpid() else 'slow imported here')\n"
	var interp string
	preloaded := false
	for i := 0; i < 12 && !preloaded; i++ {
		res := run(t, e, Request{Code: code, Dependencies: deps})
		if res.ExitCode != 0 {
			t.Fatalf("run %d: exit %d: %s", i, res.ExitCode, res.Stderr)
		}
		interp = res.Executable
		preloaded = res.Stdout == "slow preloaded\n"
		if !preloaded && res.Stdout != "slow imported here\n" {
			t.Fatalf("run %d printed %q", i, res.Stdout)
		}
		awaitReplacements(t, e)
	}
	if !preloaded {
		st, _ := preloadOf(e, interp)
		t.Fatalf("pyexec_slow was never preloaded: %+v", st)
	}
	st, ok := preloadOf(e, interp)
	if !ok {
		t.Fatalf("server_info has no preload state for %s: %+v", interp, e.WarmStats().Preload)
	}
	if !slices.Contains(st.Preloaded, "pyexec_slow") || st.CostMS["pyexec_slow"] < 50 {
		t.Errorf("preloaded %v, costs %v: want pyexec_slow, >= 50 ms", st.Preloaded, st.CostMS)
	}
	reasons := map[string]string{}
	for _, x := range st.Excluded {
		reasons[x.Module] = x.Reason
	}
	if !strings.Contains(reasons["pyexec_threads"], "threads") {
		t.Errorf("pyexec_threads excluded for %q, want a thread reason (all: %v)", reasons["pyexec_threads"], reasons)
	}
	if !strings.Contains(reasons["pyexec_cheap"], "under 20ms") {
		t.Errorf("pyexec_cheap excluded for %q, want it cheap (all: %v)", reasons["pyexec_cheap"], reasons)
	}
	if slices.Contains(st.Preloaded, "pyexec_threads") || slices.Contains(st.Preloaded, "pyexec_cheap") {
		t.Errorf("preloaded %v holds an excluded module", st.Preloaded)
	}
	// The default interpreter's runs learned nothing from the environment's.
	if def, err := e.DefaultInterpreter(t.Context()); err == nil {
		if s, ok := preloadOf(e, def.Path); ok && len(s.Preloaded) > 0 {
			t.Errorf("the default interpreter preloads %v, learned from another environment", s.Preloaded)
		}
	}
}

// TestAdaptivePreloadIgnoresWorkspaceModules: a module the run imports from
// its own directory is never reported, so never preloaded.
func TestAdaptivePreloadIgnoresWorkspaceModules(t *testing.T) {
	e := autoEngine(t)
	ws := e.Config().Workspace
	writeFile(t, filepath.Join(ws, "mine.py"), "import time\ntime.sleep(0.05)\n")
	writeFile(t, filepath.Join(ws, "main.py"), "import mine\nprint('ok')\n")
	var interp string
	for i := 0; i < 6; i++ {
		res := run(t, e, Request{ScriptPath: "main.py"})
		if res.ExitCode != 0 || res.Stdout != "ok\n" {
			t.Fatalf("run %d: exit %d, %q %s", i, res.ExitCode, res.Stdout, res.Stderr)
		}
		interp = res.Executable
		awaitReplacements(t, e)
	}
	if st, ok := preloadOf(e, interp); ok && (len(st.Preloaded) > 0 || len(st.Excluded) > 0) {
		t.Errorf("a workspace module reached adaptive preload: %+v", st)
	}
}

package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

func startSession(t *testing.T, e *Engine, req Request) *SessionProcess {
	t.Helper()
	sp, err := e.StartSession(context.Background(), req, time.Hour)
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	t.Cleanup(func() { sp.Kill("test over"); <-sp.Done() })
	return sp
}

func cell(t *testing.T, sp *SessionProcess, n int, code string) CellResult {
	t.Helper()
	res, err := sp.RunCell(context.Background(), n, code, time.Minute, time.Second, nil)
	if err != nil {
		t.Fatalf("cell %d %q: %v", n, code, err)
	}
	return res
}

// Cells share one namespace; the last expression is the result; errors end
// the cell, not the session, with the cell's own lines in the traceback.
func TestSessionCells(t *testing.T) {
	e, _ := newTestEngine(t)
	sp := startSession(t, e, Request{})
	steps := []struct {
		code, stdout, result, ename, tb string
	}{
		{code: "x = 41\nprint('set')", stdout: "set\n"},
		{code: "x += 1\nx", result: "42"},
		{code: "_ * 2", result: "84"},
		{code: "import os, sys\nprint(sys.argv[0] != '', file=sys.stderr)\nNone"},
		{code: "def f():\n    return 1/0\nf()", ename: "ZeroDivisionError", tb: "File \"<cell 5>\", line 2, in f"},
		{code: "x", result: "42"},
		{code: "def broken(:\n  pass", ename: "SyntaxError", tb: "<cell 7>"},
		{code: "import subprocess\nsubprocess.run(['echo', 'child'])\n'ok'", stdout: "child\n", result: "'ok'"},
	}
	for i, s := range steps {
		res := cell(t, sp, i+1, s.code)
		if s.stdout != "" && res.Stdout != s.stdout {
			t.Errorf("cell %d stdout %q, want %q", i+1, res.Stdout, s.stdout)
		}
		got := ""
		if res.Result != nil {
			got = *res.Result
		}
		if got != s.result {
			t.Errorf("cell %d result %q, want %q", i+1, got, s.result)
		}
		switch {
		case s.ename == "" && res.Error != nil:
			t.Errorf("cell %d: unexpected error %+v", i+1, res.Error)
		case s.ename != "" && (res.Error == nil || res.Error.Ename != s.ename):
			t.Errorf("cell %d: error %+v, want %s", i+1, res.Error, s.ename)
		case s.ename != "":
			if !strings.Contains(res.Error.Traceback, s.tb) || strings.Contains(res.Error.Traceback, "session_driver") {
				t.Errorf("cell %d traceback:\n%s", i+1, res.Error.Traceback)
			}
		}
	}
	res := cell(t, sp, 9, "import sys\nsys.exit(3)")
	if res.Exited == nil || *res.Exited != 3 {
		t.Fatalf("sys.exit: %+v", res)
	}
	<-sp.Done()
	if _, err := sp.RunCell(context.Background(), 10, "1", time.Second, time.Second, nil); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("cell after exit: %v", err)
	}
}

// A timeout interrupts the cell and keeps the namespace; a cell that
// ignores SIGINT costs the session.
func TestSessionTimeoutAndInterrupt(t *testing.T) {
	e, _ := newTestEngine(t)
	sp := startSession(t, e, Request{})
	cell(t, sp, 1, "kept = 'yes'")
	res, err := sp.RunCell(context.Background(), 2, "import time\nprint('before', flush=True)\ntime.sleep(60)", 300*time.Millisecond, 5*time.Second, nil)
	if err != nil {
		t.Fatalf("interrupted cell: %v", err)
	}
	if !res.TimedOut || !res.Interrupted || res.Error == nil || res.Error.Ename != "KeyboardInterrupt" || res.Stdout != "before\n" {
		t.Fatalf("timed out cell: %+v", res)
	}
	if r := cell(t, sp, 3, "kept"); r.Result == nil || *r.Result != "'yes'" {
		t.Fatalf("namespace after interrupt: %+v", r)
	}

	// session_interrupt: Interrupt while a cell runs.
	done := make(chan CellResult, 1)
	go func() {
		r, _ := sp.RunCell(context.Background(), 4, "import time\nprint('go', flush=True)\nwhile True: time.sleep(0.01)", time.Minute, 5*time.Second, nil)
		done <- r
	}()
	for sp.Interrupt() == nil {
		select {
		case r := <-done:
			if !r.Interrupted {
				t.Fatalf("after Interrupt: %+v", r)
			}
			goto blocked
		case <-time.After(50 * time.Millisecond): // retry: the cell may not have started yet
		}
	}
	t.Fatal("Interrupt failed")
blocked:
	_, err = sp.RunCell(context.Background(), 5, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)", 200*time.Millisecond, 200*time.Millisecond, nil)
	if !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("SIGINT-blocking cell: %v", err)
	}
	if reason, _, _ := sp.End(); reason != "timeout" {
		t.Fatalf("kill reason %q", reason)
	}
}

// The session's cgroup limit holds for the whole session: a memory bomb
// ends it with the kernel's evidence.
func TestSessionMemoryLimit(t *testing.T) {
	e, _ := newTestEngine(t)
	if !e.Capabilities().Cgroup.Available {
		t.Skip("no cgroups here")
	}
	sp := startSession(t, e, Request{Limits: &sandbox.Limits{MemoryBytes: 64 << 20}})
	cell(t, sp, 1, "a = 1")
	_, err := sp.RunCell(context.Background(), 2, "b = bytearray(512 << 20)", time.Minute, time.Second, nil)
	if !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("memory bomb: %v", err)
	}
	_, res, _ := sp.End()
	if res.LimitExceeded != "memory" {
		t.Fatalf("limit exceeded %q (exit %d, stderr %q)", res.LimitExceeded, res.ExitCode, res.Stderr)
	}
}

// A process a cell forks never comes back to the driver's loop: the server
// hears one answer per cell, and the session goes on.
func TestSessionForkedChildStaysOut(t *testing.T) {
	e, _ := newTestEngine(t)
	sp := startSession(t, e, Request{})
	res := cell(t, sp, 1, "import os\npid = os.fork()\nif pid == 0:\n    raise ValueError('child')\nos.waitpid(pid, 0)[1] >> 8")
	if res.Result == nil || *res.Result != "1" || !strings.Contains(res.Stderr, "ValueError: child") {
		t.Fatalf("fork cell: %+v", res)
	}
	if r := cell(t, sp, 2, "'still here'"); r.Result == nil || *r.Result != "'still here'" {
		t.Fatalf("after fork: %+v", r)
	}
}

// A timeout so short that SIGINT comes before the cell's first
// instruction still interrupts the cell, never the session.
func TestSessionInterruptBeforeTheCellStarts(t *testing.T) {
	e, _ := newTestEngine(t)
	sp := startSession(t, e, Request{})
	for i := 1; i <= 5; i++ {
		res, err := sp.RunCell(context.Background(), i, "while True:\n    pass", time.Microsecond, 10*time.Second, nil)
		if err != nil || !res.Interrupted {
			t.Fatalf("cell %d: %+v %v", i, res, err)
		}
	}
	if r := cell(t, sp, 6, "'alive'"); r.Result == nil || *r.Result != "'alive'" {
		t.Fatalf("after: %+v", r)
	}
}

// A cell that hits the session's process limit and cleans up after itself
// keeps its session; only processes left pressing on the limit (a fork
// bomb, TestSessionHostileCorpus) cost it.
func TestSessionProcessLimitHitAndCleanedUp(t *testing.T) {
	e, _ := newTestEngine(t)
	if !e.Capabilities().Cgroup.Available {
		t.Skip("no cgroups here")
	}
	sp := startSession(t, e, Request{Limits: &sandbox.Limits{MaxProcs: 16}})
	res := cell(t, sp, 1, `
import os, signal, time
kids, hit = [], None
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
except OSError as e:
    hit = e.errno
for k in kids:
    os.kill(k, signal.SIGKILL)
    os.waitpid(k, 0)
hit`)
	if res.Result == nil || *res.Result != "11" {
		t.Fatalf("fork until refused: %+v", res)
	}
	if r := cell(t, sp, 2, "'alive'"); r.Result == nil || *r.Result != "'alive'" {
		t.Fatalf("after the limit was hit and cleaned up: %+v", r)
	}
}

package engine

import (
	"strings"
	"testing"
)

// The exit watch (driver.py) lets a warm run's supervisor report the run
// over as soon as its process begins to exit. It may do so only when
// nothing of the run can run again; whatever a run does to the watch, the
// result is the one the run's exit gives, and nothing of the run is left.
func TestWarmExitWatch(t *testing.T) {
	e, _ := warmEngine(t, WarmConfig{Spares: 1})
	mark := newMark(t)
	// The watch's page: the one 4 KiB shared anonymous mapping G inherits
	// (the imports report page is another, so every such page is hit).
	const forge = `import ctypes
for line in open('/proc/self/maps'):
    f = line.split()
    lo, hi = (int(x, 16) for x in f[0].split('-'))
    if f[1] == 'rw-s' and hi - lo == 4096:
        ctypes.memmove(lo, b'\xff' * 40, 40)
`
	cases := []struct {
		name   string
		code   string
		stdout string
		exit   int
		early  bool // reported by the exit watch, not after wait4
	}{
		{"exit of a large process", "b = b'x' * (300 << 20)\nprint('hi')\nraise SystemExit(3)", "hi\n", 3, true},
		{"plain exit", "print('hi')\nraise SystemExit(3)", "hi\n", 3, true},
		{"killed by a signal", "import os, signal\nb = b'x' * (300 << 20)\nprint('bye', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)", "bye\n", -9, true},
		{"keyboard interrupt", "raise KeyboardInterrupt", "", -2, true},
		{"a daemon thread still running", "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\nprint('main done')\nraise SystemExit(7)", "main done\n", 7, false},
		{"a child left running", "import subprocess, sys\nsubprocess.Popen(['sleep', '30', sys.argv[1]], start_new_session=True)\nprint('left it')", "left it\n", 0, false},
		{"exec", "import os, sys\nsys.stdout.flush()\nos.execv(sys.executable, [sys.executable, '-c', 'print(\"after exec\"); raise SystemExit(4)'])", "after exec\n", 4, false},
		{"the watch's page overwritten", forge + "print('forged')\nraise SystemExit(5)", "forged\n", 5, false},
		{"its robust list unregistered", "import ctypes, os\nassert os.uname().machine in ('x86_64', 'aarch64')\nnr = 273 if os.uname().machine == 'x86_64' else 99\nctypes.CDLL(None).syscall(nr, None, 24)\nprint('gone')\nraise SystemExit(6)", "gone\n", 6, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.warm.earlyExits.Load()
			res := mustRun(t, e, Request{Code: c.code, Args: []string{mark}, Timeout: 20})
			if res.Stdout != c.stdout || res.ExitCode != c.exit || res.TimedOut {
				t.Fatalf("got stdout %q exit %d timed out %v (stderr %q), want %q exit %d", res.Stdout, res.ExitCode, res.TimedOut, res.Stderr, c.stdout, c.exit)
			}
			if res.ElapsedSeconds >= 10 {
				t.Errorf("took %.1fs: the supervisor waited for what the run left", res.ElapsedSeconds)
			}
			if got := e.warm.earlyExits.Load() - before; c.early && got != 1 {
				t.Errorf("not reported early (%d early exits)", got)
			}
			if c.name == "exit of a large process" && (res.PeakRSSBytes < 300<<20 || res.CPUUserSeconds+res.CPUSystemSeconds <= 0) {
				t.Errorf("rusage of an early report: peak RSS %d, CPU %.3f+%.3f s", res.PeakRSSBytes, res.CPUUserSeconds, res.CPUSystemSeconds)
			}
			if st := e.WarmStats(); st.Cold > 0 {
				t.Fatalf("a run went cold: %+v", st)
			}
			e.settle()
			if left := marked(mark); len(left) > 0 {
				t.Errorf("processes left: %v", left)
			}
		})
	}
	// The fork server still serves.
	if res := mustRun(t, e, Request{Code: "print(1)"}); strings.TrimSpace(res.Stdout) != "1" {
		t.Fatalf("after the cases: %+v", res)
	}
}

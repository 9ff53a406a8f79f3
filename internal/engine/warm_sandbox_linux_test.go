package engine

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// TestWarmConfinedLikeCold runs probes of every confinement mechanism on a
// cold and a warm engine with the default sandbox (workspace policy, run as
// nobody when the server is root, cgroup limits) and wants the same outcome
// from both, with the warm runs really warm. It is the warm path's half of
// the sandbox tests: what a cold run gets from its launcher, a warm run must
// get from its zygote plus its own cgroup and Landlock layer.
func TestWarmConfinedLikeCold(t *testing.T) {
	cold, warm, ws := warmPair(t)
	if os.Geteuid() != 0 {
		t.Skip("the default confinement needs a root server (run-as, cgroups, namespaces)")
	}
	caps := cold.Capabilities()
	if !caps.Landlock.Available || !caps.Cgroup.Available || !caps.MountNS.Available {
		t.Skip("needs Landlock and cgroups")
	}
	secret := filepath.Join(cold.Config().StateDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("server secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	other, err := cold.writeCode("print('another run')")
	if err != nil {
		t.Fatal(err)
	}
	lim := func(l sandbox.Limits) *sandbox.Limits { return &l }

	cases := []struct {
		name  string
		req   Request
		check func(r Result) string // "" when r is as expected
	}{
		{"identity", Request{Code: "import os; print(os.getuid(), os.getgid(), os.getgroups())"},
			wantOut("65534 65534 []\n")},
		{"workspace and tmp writable", Request{Code: `import os, tempfile
open('w.txt', 'w').write('x')
with tempfile.NamedTemporaryFile(dir=os.environ['TMPDIR']) as f:
    f.write(b'y')
print('ok', os.path.exists('w.txt'))`}, wantOut("ok True\n")},
		{"no writes elsewhere", Request{Code: `import errno
for p in ('/etc/pyexec-probe', '/var/tmp/pyexec-probe', '/usr/pyexec-probe'):
    try:
        open(p, 'w')
        print('wrote', p)
    except OSError as e:
        print(errno.errorcode[e.errno])`}, wantOutAny("EACCES\nEACCES\nEACCES\n", "EACCES\nEACCES\nEROFS\n")},
		{"state dir hidden", Request{Code: "import sys\ntry:\n    print(open(sys.argv[1]).read())\nexcept OSError as e:\n    print(type(e).__name__)", Args: []string{secret}},
			notOut("server secret")},
		{"other runs' code hidden", Request{Code: "import sys\ntry:\n    print(open(sys.argv[1]).read())\nexcept OSError as e:\n    print(type(e).__name__)", Args: []string{other}},
			notOut("another run")},
		{"home hidden", Request{Code: "import os\nprint(os.path.exists('/root/.bashrc'))"},
			wantOut("False\n")},
		// A cold run's parent (the launcher) is outside its PID namespace:
		// it has no pid there. A warm run's (its supervisor) is outside its
		// Landlock domain.
		{"parent not signalable", Request{Code: "import os\nif os.getppid() == 0:\n    print('unreachable')\nelse:\n    try:\n        os.kill(os.getppid(), 0)\n        print('signalled')\n    except PermissionError:\n        print('denied')"},
			wantOutAny("denied\n", "unreachable\n")},
		{"memory cap", Request{Code: "b = bytearray(300 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint('allocated')", Limits: lim(sandbox.Limits{MemoryBytes: 128 << 20})},
			wantLimit(sandbox.LimitMemory)},
		{"process cap", Request{Code: `import subprocess, sys
ps = []
try:
    for i in range(20):
        ps.append(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']))
    print('spawned all')
finally:
    for p in ps:
        p.kill()`, Limits: lim(sandbox.Limits{MaxProcs: 8})},
			wantLimit(sandbox.LimitProcesses)},
		{"cpu cap", Request{Code: "while True:\n    pass", Limits: lim(sandbox.Limits{CPUSeconds: 1}), Timeout: 20},
			wantLimit(sandbox.LimitCPU)},
		{"no network", Request{Code: `import socket
try:
    socket.create_connection(('192.0.2.1', 80), timeout=2)
    print('connected')
except OSError as e:
    print('unreachable')`, Network: "deny"}, wantOut("unreachable\n")},
		{"strict reads", Request{Code: "import os\ntry:\n    open('/etc/hostname').read()\n    print('read')\nexcept PermissionError:\n    print('denied', len(os.listdir('/usr/bin')) > 0)", Sandbox: "strict"},
			wantOut("denied True\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := cold.Run(context.Background(), tc.req, nil)
			if err != nil {
				t.Fatalf("cold: %v", err)
			}
			if why := tc.check(rc); why != "" {
				t.Fatalf("cold: %s\nstdout: %s\nstderr: %s", why, rc.Stdout, rc.Stderr)
			}
			before := warm.WarmStats().Warm
			rw, err := warm.Run(context.Background(), tc.req, nil)
			if err != nil {
				t.Fatalf("warm: %v", err)
			}
			if warm.WarmStats().Warm != before+1 {
				t.Fatalf("the run went cold: %+v", warm.WarmStats())
			}
			if why := tc.check(rw); why != "" {
				t.Fatalf("warm: %s\nstdout: %s\nstderr: %s", why, rw.Stdout, rw.Stderr)
			}
			if rc.Sandbox != rw.Sandbox || rc.LimitExceeded != rw.LimitExceeded || strings.Join(rc.SandboxNotes, ";") != strings.Join(rw.SandboxNotes, ";") {
				t.Errorf("reports differ:\ncold %q %q %q\nwarm %q %q %q", rc.Sandbox, rc.LimitExceeded, rc.SandboxNotes, rw.Sandbox, rw.LimitExceeded, rw.SandboxNotes)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(ws, "w.txt")); err != nil {
		t.Errorf("workspace write did not land: %v", err)
	}
}

// A warm run's leftovers in /dev/shm (POSIX shared memory, semaphores) are
// gone for the next run, as they are for cold runs with their own tmpfs; and
// a run that kills every process it may signal does not take its warm
// interpreter down with it.
func TestWarmConfinedRunsDoNotMeet(t *testing.T) {
	e, _ := warmEngine(t, WarmConfig{Spares: 2})
	if os.Geteuid() != 0 || !e.Capabilities().MountNS.Available {
		t.Skip("needs a root server with mount namespaces")
	}
	res := mustRun(t, e, Request{Code: `from multiprocessing import shared_memory
import os, signal
m = shared_memory.SharedMemory(name='pyexec-left', create=True, size=16)
m.buf[:4] = b'left'
os.makedirs('/dev/shm/d', exist_ok=True)
os.chmod('/dev/shm/d', 0)
print(sorted(os.listdir('/dev/shm')))
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass`})
	if !strings.Contains(res.Stdout, "pyexec-left") {
		t.Fatalf("first run: %+v", res)
	}
	res = mustRun(t, e, Request{Code: "import os\nprint(sorted(os.listdir('/dev/shm')))"})
	if res.Stdout != "[]\n" {
		t.Errorf("the next run sees the previous run's /dev/shm: %q %s", res.Stdout, res.Stderr)
	}
	if st := e.WarmStats(); st.Warm != 2 {
		t.Errorf("want both runs warm (the zygote survived kill(-1)): %+v", st)
	}
}

func wantOut(want string) func(Result) string {
	return wantOutAny(want)
}

func wantOutAny(wants ...string) func(Result) string {
	return func(r Result) string {
		for _, w := range wants {
			if r.Stdout == w {
				return ""
			}
		}
		return "stdout " + quote(r.Stdout) + ", want one of " + strings.Join(wants, " | ")
	}
}

func notOut(secret string) func(Result) string {
	return func(r Result) string {
		if strings.Contains(r.Stdout, secret) || r.ExitCode != 0 {
			return "read what it must not (or failed): " + quote(r.Stdout)
		}
		return ""
	}
}

func wantLimit(limit string) func(Result) string {
	return func(r Result) string {
		if r.LimitExceeded != limit {
			return "limit_exceeded " + quote(r.LimitExceeded) + ", want " + limit
		}
		return ""
	}
}

func quote(s string) string { return "\"" + s + "\"" }

// A burst of runs waits for the key's busy warm interpreter instead of
// starting cold (a cold start costs as much CPU as ten warm runs), unless
// the run occupying it is long already.
func TestWarmWaitsForBusyInterpreter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shortRun time.Duration
		wantWarm uint64
		reason   string
	}{
		{"short run: wait", time.Hour, 2, ""},
		{"long run: cold at once", -1, 1, "warm interpreters busy with long runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var waiting atomic.Int32
			e, ws := warmEngine(t, WarmConfig{Spares: 1, PerInterpreter: 1, shortRun: tc.shortRun, busyWait: time.Hour, waiting: &waiting})
			if e.Config().Sandbox.Policy == sandbox.PolicyNone {
				t.Skip("only confined warm interpreters serve one run at a time")
			}
			obs := &warmStartObserver{started: make(chan int, 1)}
			first := make(chan Result, 1)
			go func() {
				res, _ := e.Run(context.Background(), Request{Code: "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.005)\nprint('first')"}, obs)
				first <- res
			}()
			<-obs.started
			second := make(chan Result, 1)
			go func() { second <- mustRun(t, e, Request{Code: "print('second')"}) }()
			if tc.reason == "" {
				for waiting.Load() == 0 { // the second run is queued behind the first
					runtime.Gosched()
				}
			} else if res := <-second; res.Stdout != "second\n" {
				t.Fatalf("second: %+v", res)
			}
			if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if res := <-first; res.Stdout != "first\n" {
				t.Fatalf("first: %+v", res)
			}
			if tc.reason == "" {
				if res := <-second; res.Stdout != "second\n" {
					t.Fatalf("second: %+v", res)
				}
			}
			st := e.WarmStats()
			if st.Warm != tc.wantWarm || (tc.reason != "" && st.ColdReasons[tc.reason] != 1) {
				t.Errorf("want %d warm runs (cold reason %q): %+v", tc.wantWarm, tc.reason, st)
			}
		})
	}
}

package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// warmPair returns a cold and a warm engine over the same workspace and
// state dir, so code files (and so tracebacks) are the same for both.
func warmPair(t *testing.T) (cold, warm *Engine, ws string) {
	t.Helper()
	skipInWarmPass(t)
	ws, state := t.TempDir(), t.TempDir()
	var err error
	cold, err = New(Config{Workspace: ws, StateDir: state, Warm: WarmConfig{off: true}})
	if err != nil {
		t.Fatal(err)
	}
	warm, err = New(Config{Workspace: ws, StateDir: state, Warm: WarmConfig{Spares: 2, wait: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { warm.Close(); cold.Close() })
	return cold, warm, ws
}

var (
	elapsedRE = regexp.MustCompile(`after [0-9.]+s`)
	addressRE = regexp.MustCompile(`0x[0-9a-f]+`)
)

// TestWarmSameAsCold runs a corpus of scripts that probe every part of a
// Python start and exit on both paths and wants identical results.
func TestWarmSameAsCold(t *testing.T) {
	cold, warm, ws := warmPair(t)
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "sub", "helper.py"), []byte("VALUE = 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "sub", "script.py"), []byte(
		"import sys, os, helper\nprint(sys.argv, sys.path[0] == os.path.dirname(__file__), helper.VALUE, os.getcwd())\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string]map[string]string{
		"shadow": {"re.py": "print('shadowing re')\nfrom importlib import import_module\n"},
		"custom": {"sitecustomize.py": "print('sitecustomize ran')\n"},
		"pp2":    {"mod2.py": "X = 2\n"},
	} {
		os.MkdirAll(filepath.Join(ws, name), 0o755)
		for f, content := range files {
			if err := os.WriteFile(filepath.Join(ws, name, f), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []warmCase{
		{"argv path file name", Request{Code: `import sys, os
print(sys.argv[1:], sys.argv[0] == __file__, sys.path[0] == os.path.dirname(__file__), __name__, os.getcwd())
print(sys.orig_argv[1:] == ['-u'] + sys.argv, sys.orig_argv[0] == sys.executable, sys.flags)`, Args: []string{"a b", "$HOME", "'q'", "\"dq\"", "é中"}}},
		{"script path with import from its dir", Request{ScriptPath: "script.py", Args: []string{"x"}, Cwd: "sub"}},
		{"main module", Request{Code: `"""doc"""
import builtins, sys, __main__
print(sorted(globals()), __doc__, __spec__, __package__, type(__loader__).__name__, __loader__.name, __cached__)
print(__builtins__ is builtins, __main__.__dict__ is globals(), sys.modules['__main__'] is __main__)
x: int = 1
print(__annotations__)`}},
		{"pickle main class", Request{Code: `import pickle
class C:
    def __init__(self): self.v = 7
print(pickle.loads(pickle.dumps(C())).v)`}},
		{"environment", Request{Code: `import os, subprocess, tempfile
print(os.environ['FOO'], os.environ.get('BAR'), sorted(os.environ))
print(subprocess.run(['sh', '-c', 'echo "$FOO"'], capture_output=True, text=True).stdout.strip())
print(tempfile.gettempdir() == os.environ['TMPDIR'], os.path.isdir(os.environ['TMPDIR']))`, EnvVars: map[string]string{"FOO": "bar baz", "UNRELATED": "1"}}},
		{"TZ", Request{Code: `import time
print(time.timezone, time.tzname, time.strftime('%Z', time.localtime(0)))`, EnvVars: map[string]string{"TZ": "Asia/Tokyo"}}},
		{"stdin", Request{Code: `import sys
print(sys.stdin.readline().strip(), input(), sys.stdin.read().split(), sys.stdin.seekable())`, Stdin: "first\nsecond\nthird fourth\n"}},
		{"no stdin", Request{Code: `import sys
print(repr(sys.stdin.read()), sys.stdin.seekable())
try:
    input()
except EOFError as e:
    print('EOF', e)`}},
		{"stdio objects", Request{Code: `import sys
for f in (sys.stdin, sys.stdout, sys.stderr):
    print(f.name, f.mode, f.encoding, f.errors, f.line_buffering, f.write_through, f.fileno(), f.isatty(), type(f.buffer).__name__, f.buffer.name)
print(sys.stdin is sys.__stdin__, sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__)`}},
		{"interleaved output", Request{Code: `import sys
for i in range(200):
    print('out', i)
    print('err', i, file=sys.stderr)
sys.stdout.write('no newline at end')`}},
		{"big output", Request{Code: `import sys
sys.stdout.write('x' * (3 << 20))
print('tail')`}},
		{"sys.exit int", Request{Code: "import sys\nprint('before')\nsys.exit(3)"}},
		{"sys.exit string", Request{Code: "import sys\nsys.exit('fatal: bad thing')"}},
		{"sys.exit None", Request{Code: "raise SystemExit"}},
		{"sys.exit wraps", Request{Code: "import sys\nsys.exit(256 + 7)"}},
		{"sys.exit True", Request{Code: "raise SystemExit(True)"}},
		{"uncaught exception", Request{Code: `def f(x):
    return 1 / x
def g():
    try:
        f(0)
    except ZeroDivisionError as e:
        raise ValueError('wrapped') from e
g()`}},
		{"custom excepthook", Request{Code: `import sys
sys.excepthook = lambda t, v, tb: print('hook:', t.__name__, v, tb.tb_frame.f_code.co_name, file=sys.stderr)
raise RuntimeError('boom')`}},
		{"syntax error", Request{Code: "print('ok')\ndef (:\n"}},
		{"nul in source", Request{Code: "print(1)\x00\n"}},
		{"keyboard interrupt", Request{Code: "print('x')\nraise KeyboardInterrupt"}},
		{"SIGINT handler", Request{Code: `import os, signal
try:
    os.kill(os.getpid(), signal.SIGINT)
    import time; time.sleep(5)
except KeyboardInterrupt:
    print('caught KeyboardInterrupt')`}},
		{"killed by SIGKILL", Request{Code: "import os, signal\nprint('bye', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)"}},
		{"killed by SIGTERM", Request{Code: "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)"}},
		{"default signal dispositions", Request{Code: `import signal
print([(s.name, str(signal.getsignal(s))) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE, signal.SIGALRM, signal.SIGUSR1)])
print(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))`}},
		{"atexit and threads", Request{Code: `import atexit, threading, time
atexit.register(print, 'atexit 1')
atexit.register(lambda: print('atexit 2', threading.active_count()))
def work():
    time.sleep(0.2)
    print('thread finished')
threading.Thread(target=work).start()
threading.Thread(target=lambda: time.sleep(60), daemon=True).start()
print('main done')`}},
		{"atexit exception", Request{Code: `import atexit
def bad():
    raise ValueError('in atexit')
atexit.register(bad)
print('ok')`}},
		{"teardown __del__ and unflushed file", Request{Code: `class A:
    def __del__(self):
        print('A.__del__ ran')
a = A()
f = open('unflushed.txt', 'w')
f.write('data written but never flushed')
print('end of script')`}},
		{"process tree ids", Request{Code: `import os
print(os.getpgrp() == os.getppid(), os.getppid() != 1, os.getsid(0) != os.getpid())`}},
		{"open fds", Request{Code: `import os
print(sorted(int(f) for f in os.listdir('/proc/self/fd')))`}},
		{"warnings", Request{Code: "import warnings\nwarnings.warn('careful')\nprint('after')"}},
		{"subprocess python", Request{Code: `import subprocess, sys
print(subprocess.run([sys.executable, '-c', 'import os, sys; print(os.environ["FOO"], sys.argv)', 'z'], capture_output=True, text=True).stdout.strip())`, EnvVars: map[string]string{"FOO": "from-parent"}}},
		{"multiprocessing", Request{Code: `import multiprocessing as mp
if __name__ == '__main__':
    with mp.Pool(2) as p:
        print(p.map(abs, [-1, -2, -3]))`}},
		{"inspect source", Request{Code: `import inspect
def hello():
    return 1
print(inspect.getsource(hello).strip())`}},
		{"modules", Request{Code: `import sys
print(sorted(m for m in sys.modules if not m.startswith('encodings.')))`}},
		{"PYTHONPATH", Request{Code: `import sys, helper
print(sys.path, helper.VALUE)`, Cwd: "sub", EnvVars: map[string]string{"PYTHONPATH": "pp:/nonexistent/x/::" + ws + "/sub:" + ws + "/../" + filepath.Base(ws) + "/pp2/"}}},
		{"PYTHONPATH shadowing a startup module", Request{Code: `import sys, re
print(sys.path[1], re.__file__.endswith('shadow/re.py'))`, EnvVars: map[string]string{"PYTHONPATH": ws + "/shadow"}}},
		{"PYTHONPATH with sitecustomize", Request{Code: `import sys
print('sitecustomize' in sys.modules)`, EnvVars: map[string]string{"PYTHONPATH": ws + "/custom"}}},
		{"PYTHON var runs cold", Request{Code: "import sys\nprint(sys.dont_write_bytecode, [p for p in sys.path if p.endswith('extra')])", EnvVars: map[string]string{"PYTHONPATH": "/nonexistent/extra", "PYTHONDONTWRITEBYTECODE": "1"}}},
		{"timeout", Request{Code: "import time\ntime.sleep(30)", Timeout: 1}},
	}
	ctx := context.Background()
	// The default interpreter, then every other one from 3.8 on.
	pythons := []Interpreter{{Version: "default"}}
	if !testing.Short() {
		def, _ := cold.DefaultInterpreter(ctx)
		for _, it := range cold.Interpreters(ctx) {
			if eligibleVersion(it.Version) && it.Path != def.Path {
				pythons = append(pythons, it)
			}
		}
	}
	for _, py := range pythons {
		t.Run(py.Version, func(t *testing.T) { sameAsCold(t, cold, warm, py.Path, cases) })
	}
	if t.Failed() {
		return
	}
	data, err := os.ReadFile(filepath.Join(ws, "unflushed.txt"))
	if err != nil || string(data) != "data written but never flushed" {
		t.Errorf("unflushed file after both runs: %q, %v", data, err)
	}
	st := warm.WarmStats()
	t.Logf("warm engine: %+v", st)
	if st.Warm < uint64(len(cases)*len(pythons))-uint64(4*len(pythons)) { // NUL, shadowing (2), PYTHONDONTWRITEBYTECODE run cold
		t.Errorf("only %d of %d runs were warm: %+v", st.Warm, len(cases)*len(pythons), st)
	}
}

type warmCase struct {
	name string
	req  Request
}

func sameAsCold(t *testing.T, cold, warm *Engine, python string, cases []warmCase) {
	ctx := context.Background()
	for _, tc := range cases {
		tc.req.Python = python
		t.Run(tc.name, func(t *testing.T) {
			rc, err := cold.Run(ctx, tc.req, nil)
			if err != nil {
				t.Fatalf("cold: %v", err)
			}
			rw, err := warm.Run(ctx, tc.req, nil)
			if err != nil {
				t.Fatalf("warm: %v", err)
			}
			norm := func(s string) string {
				return addressRE.ReplaceAllString(elapsedRE.ReplaceAllString(s, "after Xs"), "0xADDR")
			}
			if norm(rc.Stdout) != norm(rw.Stdout) || norm(rc.Stderr) != norm(rw.Stderr) || rc.ExitCode != rw.ExitCode || rc.TimedOut != rw.TimedOut || rc.StdoutBytes != rw.StdoutBytes {
				t.Errorf("cold and warm differ\ncold: exit %d timed_out %v\nstdout:\n%s\nstderr:\n%s\nwarm: exit %d timed_out %v\nstdout:\n%s\nstderr:\n%s",
					rc.ExitCode, rc.TimedOut, trim(rc.Stdout), rc.Stderr, rw.ExitCode, rw.TimedOut, trim(rw.Stdout), rw.Stderr)
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 2000 {
		return s[:1000] + "\n...\n" + s[len(s)-1000:]
	}
	return s
}

func alive(pid int) bool {
	return pid > 0 && unix.Kill(pid, 0) == nil
}

// skipInWarmPass skips tests that set their own warm configuration in the
// second (forced warm) pass: it would run them the same way again.
func skipInWarmPass(t *testing.T) {
	if forcedWarm != nil {
		t.Skip("sets its own warm configuration: covered by the first pass")
	}
}

func warmEngine(t *testing.T, cfg WarmConfig) (*Engine, string) {
	t.Helper()
	skipInWarmPass(t)
	ws := t.TempDir()
	cfg.wait = true
	e, err := New(Config{Workspace: ws, StateDir: t.TempDir(), Warm: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, ws
}

func mustRun(t *testing.T, e *Engine, req Request) Result {
	t.Helper()
	res, err := e.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A run's leftovers die with it on the warm path too: a setsid grandchild
// on timeout, and a daemon left behind by a script that exited.
func TestWarmKillsTree(t *testing.T) {
	e, _ := warmEngine(t, WarmConfig{Spares: 1})
	mark := newMark(t)
	spawn := `import os, subprocess, sys, time
p = subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(60)', sys.argv[1]])
print('spawned', flush=True)
`
	res := mustRun(t, e, Request{Code: spawn + "time.sleep(60)\n", Timeout: 3, Args: []string{mark}})
	if !res.TimedOut || !strings.Contains(res.Stdout, "spawned") || !strings.Contains(res.Stderr, "[TIMEOUT]") {
		t.Fatalf("want a timeout with partial output, got %+v", res)
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("setsid grandchild %v outlived the timed-out run", left)
	}
	res = mustRun(t, e, Request{Code: spawn, Args: []string{mark}})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("daemon %v outlived its run", left)
	}
	ctx, cancel := context.WithCancel(context.Background())
	obs := &warmStartObserver{started: make(chan int, 1)}
	go func() { <-obs.started; cancel() }()
	res, err := e.Run(ctx, Request{Code: "import time\ntime.sleep(60)"}, obs)
	if err != nil || res.Success || !strings.Contains(res.Stderr, "[CANCELLED]") {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	if st := e.WarmStats(); st.Warm != 3 {
		t.Errorf("want 3 warm runs: %+v", st)
	}
}

type warmStartObserver struct{ started chan int }

func (o *warmStartObserver) Started(pid int)           { o.started <- pid }
func (o *warmStartObserver) Output(s Stream, p []byte) {}

// Every run is a fresh process: nothing one run does to the interpreter is
// seen by the next, and random state differs.
func TestWarmNoLeaksBetweenRuns(t *testing.T) {
	e, _ := warmEngine(t, WarmConfig{Spares: 2})
	first := mustRun(t, e, Request{Code: `import json, os, random, sys
json.leak = 1
os.environ['LEAK'] = '1'
sys.path.append('/leak')
print(random.random(), os.getpid())`})
	second := mustRun(t, e, Request{Code: `import json, os, random, sys
print(random.random(), os.getpid())
print(hasattr(json, 'leak'), 'LEAK' in os.environ, '/leak' in sys.path)`})
	l1 := strings.Fields(first.Stdout)
	l2 := strings.Fields(second.Stdout)
	if len(l1) != 2 || len(l2) != 5 {
		t.Fatalf("unexpected output %q %q (%s %s)", first.Stdout, second.Stdout, first.Stderr, second.Stderr)
	}
	if l1[0] == l2[0] || l1[1] == l2[1] {
		t.Errorf("two runs shared random state or a process: %q %q", first.Stdout, second.Stdout)
	}
	if got := strings.Join(l2[2:], " "); got != "False False False" {
		t.Errorf("state leaked between runs: %s", got)
	}
}

func TestWarmPreload(t *testing.T) {
	e, _ := warmEngine(t, WarmConfig{Spares: 1, Preload: []string{"json", "decimal"}})
	res := mustRun(t, e, Request{Code: "import sys\nprint('decimal' in sys.modules, 'json' in sys.modules)"})
	if strings.TrimSpace(res.Stdout) != "True True" {
		t.Errorf("preloaded modules missing: %+v", res)
	}
	bad, _ := warmEngine(t, WarmConfig{Spares: 1, Preload: []string{"no_such_module_pyexec"}})
	res = mustRun(t, bad, Request{Code: "print('still runs')"})
	if strings.TrimSpace(res.Stdout) != "still runs" {
		t.Errorf("a failing preload must not fail runs: %+v", res)
	}
	if st := bad.WarmStats(); st.Warm != 0 || st.ColdReasons["warm interpreter failed"] != 1 {
		t.Errorf("want the run cold because the warm interpreter failed: %+v", st)
	}
}

// A zygote that dies is replaced; runs in the meantime go cold.
func TestWarmZygoteDeath(t *testing.T) {
	e, _ := warmEngine(t, WarmConfig{Spares: 1})
	mustRun(t, e, Request{Code: "print(1)"})
	z := e.warm.zygoteFor(t)
	pid := int(z.pid.Load())
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-z.dead
	for i := 0; i < 2; i++ {
		if res := mustRun(t, e, Request{Code: "print('after')"}); strings.TrimSpace(res.Stdout) != "after" {
			t.Fatalf("run after the zygote died: %+v", res)
		}
	}
	if z2 := e.warm.zygoteFor(t); z2 == z {
		t.Error("the dead zygote is still in the pool")
	}
}

// Close leaves no process behind: not the zygote, not its spare runs (all
// of them carry the driver's path, under this engine's state dir, in their
// command line), and no cgroup: not the runs', not the spares made ahead.
func TestWarmCloseLeavesNothing(t *testing.T) {
	e, _ := warmEngine(t, WarmConfig{Spares: 3})
	mustRun(t, e, Request{Code: "print(1)"})
	driver := e.warm.driverPath
	if n := len(processesWith(driver)); n < 1 {
		t.Fatalf("want the zygote (and spares) running, found %d processes", n)
	}
	if os.Geteuid() == 0 {
		// The next runs' cgroups are made ahead (their first run's at the
		// zygote's start): there are spares to remove.
		spares := e.warm.confine.Spares()
		if len(spares) == 0 {
			t.Error("no spare cgroups made ahead")
		}
		for _, d := range spares {
			if _, err := os.Stat(d); err != nil {
				t.Errorf("spare cgroup: %v", err)
			}
		}
	}
	e.Close()
	if pids := processesWith(driver); len(pids) > 0 {
		t.Errorf("processes survived Close: %v", pids)
	}
	if left := tmpsOfCgroups(e.cfg.StateDir); len(left) > 0 {
		t.Errorf("cgroups survived Close: %v", left)
	}
	if spares := e.warm.confine.Spares(); len(spares) > 0 {
		t.Errorf("spares survived Close: %v", spares)
	}
	if res := mustRun(t, e, Request{Code: "print('cold after close')"}); strings.TrimSpace(res.Stdout) != "cold after close" {
		t.Errorf("run after Close: %+v", res)
	}
}

// processesWith lists the live processes whose command line contains s.
func processesWith(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(data), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestWarmStale(t *testing.T) {
	dir := t.TempDir()
	fi, _ := os.Stat(dir)
	z := &zygote{paths: []pathStamp{{dir, fi.ModTime()}}}
	if z.stale() {
		t.Fatal("stale before any change")
	}
	if err := os.WriteFile(filepath.Join(dir, "new.pth"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !z.stale() {
		t.Error("a new file on sys.path must make the zygote stale")
	}
}

func (w *warmPool) zygoteFor(t *testing.T) *zygote {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.zs {
		if len(l) > 0 {
			return l[0]
		}
	}
	return nil
}

// waitZygote returns the pooled zygote once there is one: a run may be
// served cold while its interpreter's fork server is still starting.
func (w *warmPool) waitZygote(t *testing.T) *zygote {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if z := w.zygoteFor(t); z != nil {
			return z
		}
		if time.Now().After(deadline) {
			t.Fatal("no fork server pooled 30 s after a run")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Job runs inherit extra files (fd 3, ...) and a helper dir on PYTHONPATH:
// the warm path passes both as the launcher does.
func TestWarmExtras(t *testing.T) {
	cold, warm, ws := warmPair(t)
	helper := filepath.Join(ws, "helper")
	os.MkdirAll(helper, 0o755)
	os.WriteFile(filepath.Join(helper, "pyexec_helper_mod.py"), []byte("def hello():\n    return 'helper'\n"), 0o644)
	code := `import os, sys, pyexec_helper_mod
print(sorted(int(f) for f in os.listdir('/proc/self/fd') if int(f) < 10), os.get_inheritable(3), os.get_inheritable(4))
os.write(3, b'fd3 from ' + os.environ['WHO'].encode())
os.write(4, b'fd4')
print(pyexec_helper_mod.hello(), sys.path[1] == os.environ['HELPER'])`
	runWith := func(e *Engine) (Result, string, string) {
		r3, w3, _ := os.Pipe()
		r4, w4, _ := os.Pipe()
		defer r3.Close()
		defer r4.Close()
		res, err := e.RunWith(context.Background(), Request{Code: code}, nil, Extras{
			Env: []string{"WHO=run", "HELPER=" + helper}, PythonPath: []string{helper}, ExtraFiles: []*os.File{w3, w4},
		})
		w3.Close()
		w4.Close()
		if err != nil {
			t.Fatal(err)
		}
		b3, _ := io.ReadAll(r3)
		b4, _ := io.ReadAll(r4)
		return res, string(b3), string(b4)
	}
	rc, c3, c4 := runWith(cold)
	before := warm.WarmStats().Warm
	rw, w3, w4 := runWith(warm)
	if warm.WarmStats().Warm != before+1 {
		t.Fatalf("the run with extras went cold: %+v", warm.WarmStats())
	}
	if rc.Stdout != rw.Stdout || rc.Stderr != rw.Stderr || c3 != w3 || c4 != w4 || rc.ExitCode != 0 {
		t.Errorf("cold %q %q %q %q, warm %q %q %q %q", rc.Stdout, rc.Stderr, c3, c4, rw.Stdout, rw.Stderr, w3, w4)
	}
}

// Retiring a zygote (idle, stale, evicted) lets its runs in flight finish.
func TestWarmRetireKeepsRunsInFlight(t *testing.T) {
	e, ws := warmEngine(t, WarmConfig{Spares: 1})
	fifo := filepath.Join(ws, "go.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	obs := &warmStartObserver{started: make(chan int, 1)}
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := e.Run(context.Background(), Request{Code: "print(open('go.fifo').read())"}, obs)
		done <- outcome{res, err}
	}()
	<-obs.started
	z := e.warm.zygoteFor(t)
	e.warm.retire(z)
	if err := os.WriteFile(fifo, []byte("finished after retirement"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || strings.TrimSpace(o.res.Stdout) != "finished after retirement" || o.res.ExitCode != 0 {
		t.Fatalf("run in flight: %+v %v", o.res, o.err)
	}
	<-z.dead // and then the zygote goes
	if st := e.WarmStats(); st.Warm != 1 {
		t.Errorf("%+v", st)
	}
}

// Idle zygotes are retired; MaxInterpreters evicts the least recently used.
func TestWarmShrinkAndEvict(t *testing.T) {
	e, _ := warmEngine(t, WarmConfig{Spares: 1, IdleTimeout: 100 * time.Millisecond})
	mustRun(t, e, Request{Code: "print(1)"})
	if z := e.warm.zygoteFor(t); z != nil { // (or retired already)
		<-z.dead // retired by the janitor once idle
	}
	if z2 := e.warm.zygoteFor(t); z2 != nil {
		t.Errorf("an idle zygote is still pooled")
	}

	e2, _ := warmEngine(t, WarmConfig{Spares: 1, MaxInterpreters: 1})
	var other Interpreter
	def, _ := e2.DefaultInterpreter(context.Background())
	for _, it := range e2.Interpreters(context.Background()) {
		if eligibleVersion(it.Version) && it.Path != def.Path {
			other = it
			break
		}
	}
	if other.Path == "" {
		t.Skip("needs a second interpreter")
	}
	mustRun(t, e2, Request{Code: "print(1)"})
	first := e2.warm.waitZygote(t)
	res := mustRun(t, e2, Request{Code: "import sys; print(sys.executable)", Python: other.Path})
	if strings.TrimSpace(res.Stdout) != other.Path {
		t.Fatalf("ran %q, want %s", res.Stdout, other.Path)
	}
	<-first.dead // evicted for the second interpreter
	if z := e2.warm.zygoteFor(t); z == nil || !strings.HasPrefix(z.key, other.Path+"\x00") {
		t.Errorf("want only %s's zygote pooled, have %+v", other.Path, z)
	}
}

package engine

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Tests that runs touch nothing outside themselves: no process (another
// run, a warm interpreter, the server), no IPC object and no /dev/shm file
// of another run. Each runs cold, and again warm in the second pass (see
// warm_main_test.go), where the runs of one warm interpreter come one
// after another from the same fork server.

// isolationEngine is an engine with the default sandbox on a root server.
func isolationEngine(t *testing.T) (*Engine, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("run isolation needs a root server (PID, IPC and mount namespaces)")
	}
	e, ws := newTestEngine(t)
	if !e.Capabilities().PidNS.Available || !e.Capabilities().MountNS.Available {
		t.Skip("needs PID and mount namespaces with a private /proc")
	}
	return e, ws
}

func hostileScript(t *testing.T, ws, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "hostile", name))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, name), string(src))
	return name
}

// runUntilReleased starts a run that reports its limits and priority once
// a file appears in the workspace, and returns its pid (in the server's
// PID namespace) once it is waiting, and a channel with its result.
func runUntilReleased(t *testing.T, e *Engine, ws, release string) (int, <-chan Result) {
	t.Helper()
	obs := &startObserver{marker: "WAITING", seen: make(chan struct{})}
	pids := &pidKnown{known: make(chan struct{})}
	done := make(chan Result, 1)
	go func() {
		res, err := e.Run(context.Background(), Request{Code: `import os, resource, time
print("WAITING", flush=True)
while not os.path.exists(` + strconv.Quote(release) + `):
    time.sleep(0.01)
print("NOFILE", resource.getrlimit(resource.RLIMIT_NOFILE))
print("FSIZE", resource.getrlimit(resource.RLIMIT_FSIZE))
print("NICE", os.getpriority(os.PRIO_PROCESS, 0))
print("CPUS", len(os.sched_getaffinity(0)) == os.cpu_count())
print("POLICY", os.sched_getscheduler(0))
`, Timeout: 60}, multiObserver{obs, pids})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// The pid and the first output come on separate paths, in either
	// order: wait for both.
	for _, ready := range []<-chan struct{}{obs.seen, pids.known} {
		select {
		case <-ready:
		case res := <-done:
			t.Fatalf("the target run ended early: %+v", res)
		}
	}
	return int(pids.pid.Load()), done
}

// pidKnown records a run's pid and closes known once it is.
type pidKnown struct {
	pid   atomic.Int64
	known chan struct{}
	once  sync.Once
}

func (o *pidKnown) Started(pid int) {
	o.pid.Store(int64(pid))
	o.once.Do(func() { close(o.known) })
}

func (o *pidKnown) Output(s Stream, p []byte) {}

type multiObserver []Observer

func (m multiObserver) Started(pid int) {
	for _, o := range m {
		o.Started(pid)
	}
}

func (m multiObserver) Output(s Stream, p []byte) {
	for _, o := range m {
		o.Output(s, p)
	}
}

// zygotePIDs lists the warm interpreters' pids (in the server's namespace).
func (e *Engine) zygotePIDs() []int {
	if e.warm == nil {
		return nil
	}
	e.warm.mu.Lock()
	defer e.warm.mu.Unlock()
	var out []int
	for _, l := range e.warm.zs {
		for _, z := range l {
			out = append(out, int(z.pid.Load()))
		}
	}
	return out
}

// A run cannot limit, renice, pin, reschedule, signal or read the command
// line or environment of a concurrent run, of a warm interpreter, or of the
// server (whose --token could be on its command line), nor of anything
// else its own PID namespace shows; renicing "every process of its uid"
// reaches only its own. The target run checks afterwards that nothing of
// it changed.
func TestRunCannotReachOtherProcesses(t *testing.T) {
	e, ws := isolationEngine(t)
	release := filepath.Join(ws, "release")
	target, done := runUntilReleased(t, e, ws, release)
	script := hostileScript(t, ws, "reach_processes.py")
	args := []string{fmt.Sprintf("run:%d", target), fmt.Sprintf("server:%d", os.Getpid())}
	for _, z := range e.zygotePIDs() {
		args = append(args, fmt.Sprintf("forkserver:%d", z))
	}
	res := run(t, e, Request{ScriptPath: script, Args: args, Timeout: 60})
	t.Logf("target run pid %d; prober: %s", target, strings.SplitN(res.Stdout, "\n", 2)[0])
	writeFile(t, release, "")
	tres := <-done
	if res.ExitCode != 0 || strings.Contains(res.Stdout, "REACHED") || !strings.Contains(res.Stdout, "SWEEP 0 reachable") {
		t.Errorf("a run reached processes outside itself (exit %d):\n%s\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, label := range []string{"run", "server"} {
		if !strings.Contains(res.Stdout, label+" prlimit DENIED") || !strings.Contains(res.Stdout, label+" cmdline DENIED") {
			t.Errorf("no refusal reported for %s:\n%s", label, res.Stdout)
		}
	}
	for _, want := range []string{"NOFILE (1024, 1024)", "NICE 0", "CPUS True", "POLICY 0"} {
		if !strings.Contains(tres.Stdout, want) {
			t.Errorf("the target run was changed: want %q in\n%s", want, tres.Stdout)
		}
	}
}

// A warm run cannot touch its own fork server or supervisor, so what it
// tries there never reaches the next run: after a run that tries to lower
// the file-size limit, renice and pin every other pid it can name (the
// fork server, its threads, the supervisor), and to renice its uid and its
// process group (the supervisor's), the next run of the same warm
// interpreter writes a file bigger than that "limit" with no [LIMIT], at
// normal priority.
func TestWarmRunCannotTamperWithItsForkServer(t *testing.T) {
	e, _ := warmEngine(t, WarmConfig{Spares: 1, PerInterpreter: 1})
	if os.Geteuid() != 0 || !e.Capabilities().PidNS.Available {
		t.Skip("needs a root server with PID namespaces")
	}
	res := mustRun(t, e, Request{Code: `import os, resource
me, hit = os.getpid(), []
for pid in range(1, 4096):
    if pid == me:
        continue
    for name, f in (("prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_FSIZE, (4096, 4096))),
                    ("nice", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
                    ("affinity", lambda: os.sched_setaffinity(pid, {0}))):
        try:
            f()
            hit.append((pid, name))
        except OSError:
            pass
for which, who, name in ((os.PRIO_USER, os.getuid(), "uid"), (os.PRIO_PGRP, 0, "own group, the supervisor's")):
    try:
        os.setpriority(which, who, 19)
        hit.append((name, "nice"))
    except OSError:
        pass
print("PARENT", os.getppid() > 1, "HIT", hit)
`})
	if !strings.Contains(res.Stdout, "PARENT True HIT []") {
		t.Errorf("the run reached its fork server's processes: %q %s", res.Stdout, res.Stderr)
	}
	next := mustRun(t, e, Request{Code: `import os
with open("big.bin", "wb") as f:
    f.write(b"x" * (1 << 20))
print("WROTE", os.path.getsize("big.bin"), "NICE", os.getpriority(os.PRIO_PROCESS, 0), "CPUS", len(os.sched_getaffinity(0)) == os.cpu_count())
`})
	if next.Stdout != "WROTE 1048576 NICE 0 CPUS True\n" || next.LimitExceeded != "" {
		t.Errorf("the next run inherited what the previous one tried: %+v", next)
	}
	if st := e.WarmStats(); st.Warm != 2 {
		t.Errorf("want both runs warm, on one fork server: %+v", st)
	}
}

// meminfoShmem is the kernel's Shmem (tmpfs and SysV shared memory) in
// bytes.
func meminfoShmem(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "Shmem:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no Shmem in /proc/meminfo")
	return 0
}

var ipcKeyRE = regexp.MustCompile(`KEYS (\d+) (\d+) (\d+)`)

// hostHasIPCKey reports whether the server's IPC namespace has a SysV
// object of that key (kind shm, sem or msg).
func hostHasIPCKey(t *testing.T, kind string, key int64) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/sysvipc/" + kind)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			if k, err := strconv.ParseInt(f[0], 10, 64); err == nil && k == key {
				return true
			}
		}
	}
	return false
}

// Nothing a run allocates in SysV IPC or POSIX message queues outlives it:
// a shared memory segment, a semaphore set and a message queue made and
// left by one run are invisible to the next (warm: of the same fork
// server), never in the server's IPC namespace, and 320 MiB of segments
// left by a run with a 512 MiB memory limit are freed (not resident) once
// it is over.
func TestIPCDiesWithTheRun(t *testing.T) {
	e, ws := isolationEngine(t)
	script := hostileScript(t, ws, "ipc_leftovers.py")
	res := run(t, e, Request{ScriptPath: script, Args: []string{"make"}})
	m := ipcKeyRE.FindStringSubmatch(res.Stdout)
	if res.ExitCode != 0 || m == nil || !strings.Contains(res.Stdout, "MQ ") {
		t.Fatalf("making: %+v", res)
	}
	for i, kind := range []string{"shm", "sem", "msg"} {
		key, _ := strconv.ParseInt(m[i+1], 10, 64)
		if hostHasIPCKey(t, kind, key) {
			t.Errorf("the run's SysV %s (key %d) is in the server's IPC namespace", kind, key)
		}
	}
	res = run(t, e, Request{ScriptPath: script, Args: []string{"find", m[1], m[2], m[3]}})
	if res.ExitCode != 0 || res.Stdout != "shm gone\nsem gone\nmsg gone\nmq gone\n" {
		t.Errorf("the next run found what the previous one left: %q %s", res.Stdout, res.Stderr)
	}

	before := meminfoShmem(t)
	lim := e.cfg.Sandbox.Limits
	lim.MemoryBytes = 512 << 20
	res = run(t, e, Request{ScriptPath: script, Args: []string{"hold", strconv.Itoa(320 << 20)}, Limits: &lim})
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "HELD") {
		t.Fatalf("holding 320 MiB: %+v", res)
	}
	// The kernel frees an IPC namespace's segments when its last process
	// is gone (a cold run's) or when the supervisor removes them (a warm
	// run's); the former is asynchronous, so allow it a moment.
	deadline := time.Now().Add(10 * time.Second)
	for meminfoShmem(t) > before+(160<<20) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if now := meminfoShmem(t); now > before+(160<<20) {
		t.Errorf("shared memory still resident after the run: %d MiB more than before", (now-before)>>20)
	}
}

// Whatever a warm run leaves in /dev/shm (a tree deeper than PATH_MAX,
// directories it made unreadable, FIFOs, sockets, many files), the next
// run finds it empty, and the fork server survives to serve it.
func TestWarmShmLeftoversNeverReachTheNextRun(t *testing.T) {
	// The next run waits for the fork server however long the supervisor
	// takes to remove 23,000 entries.
	e, ws := warmEngine(t, WarmConfig{Spares: 1, PerInterpreter: 1, busyWait: time.Hour})
	if os.Geteuid() != 0 || !e.Capabilities().MountNS.Available {
		t.Skip("needs a root server with mount namespaces")
	}
	script := hostileScript(t, ws, "shm_leftovers.py")
	res := mustRun(t, e, Request{ScriptPath: script, Timeout: 120})
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "LEFT") {
		t.Fatalf("first run: %+v", res)
	}
	t0 := time.Now()
	res = mustRun(t, e, Request{Code: "import os\nprint(sorted(os.listdir('/dev/shm')))"})
	t.Logf("the next run started after %v", time.Since(t0))
	if res.Stdout != "[]\n" || res.ExitCode != 0 {
		t.Errorf("the next run sees the previous run's /dev/shm: %q %s", res.Stdout, res.Stderr)
	}
	if st := e.WarmStats(); st.Warm != 2 {
		t.Errorf("want both runs warm on the same fork server: %+v", st)
	}
	e.warm.reasonsMu.Lock()
	broken := fmt.Sprint(e.warm.retiredBroken)
	e.warm.reasonsMu.Unlock()
	if broken != "map[]" {
		t.Errorf("the fork server was retired: %s", broken)
	}
}

// A supervisor that dies during a run is never reported as the run's exit
// status: the run is an internal error, the fork server is retired, and the
// next run has its own real status.
func TestWarmSupervisorDeathIsNotAnExitStatus(t *testing.T) {
	e, _ := warmEngine(t, WarmConfig{Spares: 1, PerInterpreter: 1})
	if os.Geteuid() != 0 {
		t.Skip("needs a root server")
	}
	obs := &startObserver{marker: "WAITING", seen: make(chan struct{})}
	pids := &pidKnown{known: make(chan struct{})}
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := e.Run(context.Background(), Request{Code: "import time\nprint('WAITING', flush=True)\ntime.sleep(60)", Timeout: 60}, multiObserver{obs, pids})
		done <- outcome{res, err}
	}()
	<-obs.seen
	// The run's pid reaches the observer from the fork server's message,
	// which may come after the run's first output.
	for deadline := time.Now().Add(30 * time.Second); pids.pid.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	sup := parentOf(int(pids.pid.Load()))
	if sup <= 1 {
		t.Fatalf("no supervisor for pid %d", pids.pid.Load())
	}
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if out.err == nil || !strings.Contains(out.err.Error(), "supervisor died") {
		t.Fatalf("want an internal error, got %+v %v", out.res, out.err)
	}
	var retired atomic.Bool
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !retired.Load(); time.Sleep(10 * time.Millisecond) {
		e.warm.reasonsMu.Lock()
		retired.Store(len(e.warm.retiredBroken) > 0)
		e.warm.reasonsMu.Unlock()
	}
	if !retired.Load() {
		t.Error("the fork server was not retired")
	}
	res := mustRun(t, e, Request{Code: "import sys; sys.exit(3)"})
	if res.ExitCode != 3 {
		t.Errorf("the next run: %+v", res)
	}
}

// When nobody cannot write the workspace (another user's, not idmappable),
// runs are refused with how to fix it, never run as root behind the
// operator's back; with --run-as none they run as root without
// capabilities, as asked.
func TestRootFallbackIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("run-as applies to a root server")
	}
	base, err := os.MkdirTemp("/var/tmp", "pyexec-ws-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(ws, 1234, 1234)
	e, err := New(Config{Workspace: ws, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	_, err = e.Run(context.Background(), Request{Code: "import os; print(os.getuid())"}, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot write the workspace") || !strings.Contains(err.Error(), "--run-as none") {
		t.Fatalf("want a refusal naming the fixes, got %v", err)
	}
	root, err := New(Config{Workspace: ws, StateDir: t.TempDir(), RunAs: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	res := run(t, root, Request{Code: "import os; print(os.getuid())"})
	if res.Stdout != "0\n" || !strings.Contains(res.Sandbox, "root without capabilities") {
		t.Errorf("--run-as none: %+v", res)
	}
}

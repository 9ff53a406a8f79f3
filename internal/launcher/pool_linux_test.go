package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// TestMain lets this test binary act as the launcher, as pyexec does.
func TestMain(m *testing.M) {
	MaybeRun()
	os.Exit(m.Run())
}

// runOut is one run's captured output and final event.
type runOut struct {
	stdout, stderr string
	ev             Event
	err            error
	launcherPID    int
}

// runSh runs a shell script through pool (or a fresh launcher if pool is
// nil), feeding stdin and extra files.
func runSh(t *testing.T, pool *Pool, script, stdin string, extra ...*os.File) runOut {
	t.Helper()
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	inR, inW, _ := os.Pipe()
	spec := Spec{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Grace: time.Second, ExtraFiles: len(extra)}
	opts := Options{Stdin: inR, Stdout: outW, Stderr: errW, ExtraFiles: extra}
	var proc *Process
	var err error
	if pool != nil {
		proc, err = pool.Start(spec, opts)
	} else {
		proc, err = Start(spec, opts)
	}
	outW.Close()
	errW.Close()
	inR.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() { io.WriteString(inW, stdin); inW.Close() }()
	so, _ := io.ReadAll(outR)
	se, _ := io.ReadAll(errR)
	ev, werr := proc.Wait()
	return runOut{string(so), string(se), ev, werr, proc.cmd.Process.Pid}
}

// settle fills the pool and waits until it is full.
func settle(p *Pool) {
	p.fill()
	p.spawns.Wait()
}

func readyPIDs(p *Pool) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for _, a := range p.idle {
		pids = append(pids, a.proc.cmd.Process.Pid)
	}
	return pids
}

func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// A run handed to a launcher started ahead behaves as one started fresh:
// streams, stdin, extra files, exit code; the launcher is the one that
// was waiting, and it is used once.
func TestPoolRunsLikeStart(t *testing.T) {
	p := NewPool("", 1)
	defer p.Close()
	xr, xw, _ := os.Pipe()
	defer xr.Close()
	script := `read line; echo "out:$line"; echo err >&2; echo extra >&3; ls /proc/self/fd | tr '\n' ' '; exit 7`

	want := runSh(t, nil, script, "hello\n", xw)
	if st := p.Stats(); st.Ready != 0 || st.Served != 0 {
		t.Fatalf("a pool nobody used started launchers: %+v", st)
	}
	settle(p)
	waiting := readyPIDs(p)
	if len(waiting) != 1 {
		t.Fatalf("ready launchers %v, want 1", waiting)
	}
	got := runSh(t, p, script, "hello\n", xw)
	xw.Close()
	extra, _ := io.ReadAll(xr)
	if got.err != nil || want.err != nil {
		t.Fatalf("errors: ahead %v, fresh %v", got.err, want.err)
	}
	if got.stdout != want.stdout || got.stderr != want.stderr || got.ev.ExitCode != 7 || want.ev.ExitCode != 7 {
		t.Fatalf("ahead: %q %q %d; fresh: %q %q %d", got.stdout, got.stderr, got.ev.ExitCode, want.stdout, want.stderr, want.ev.ExitCode)
	}
	// The script's processes hold only their streams and the one extra
	// file (fd 3), plus the directory ls reads: nothing of the handoff.
	if got.stdout != "out:hello\n0 1 2 3 4 " {
		t.Fatalf("stdout %q", got.stdout)
	}
	if string(extra) != "extra\nextra\n" {
		t.Fatalf("extra file got %q", extra)
	}
	if got.launcherPID != waiting[0] {
		t.Fatalf("run went to launcher %d, the waiting one was %d", got.launcherPID, waiting[0])
	}
	if st := p.Stats(); st.Served != 1 {
		t.Fatalf("stats %+v, want one served", st)
	}
	p.Wait()
	if !gone(got.launcherPID) {
		t.Fatalf("launcher %d still there after its run", got.launcherPID)
	}
	settle(p)
	if now := readyPIDs(p); len(now) != 1 || now[0] == waiting[0] {
		t.Fatalf("replacement %v (the used one was %d)", now, waiting[0])
	}
}

// Terminate reaches a run handed to a launcher started ahead, and the
// whole tree goes with it.
func TestPoolTerminate(t *testing.T) {
	p := NewPool("", 1)
	defer p.Close()
	settle(p)
	outR, outW, _ := os.Pipe()
	proc, err := p.Start(Spec{Argv: []string{"/bin/sh", "-c", "sleep 100 & echo $!; wait"}, Dir: "/", Grace: 200 * time.Millisecond},
		Options{Stdout: outW})
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := outR.Read(buf)
	proc.Terminate()
	ev, err := proc.Wait()
	if err != nil || ev.Signal != int(syscall.SIGTERM) {
		t.Fatalf("event %+v, err %v: want the run ended by SIGTERM", ev, err)
	}
	var child int
	for _, c := range strings.TrimSpace(string(buf[:n])) {
		child = child*10 + int(c-'0')
	}
	if child == 0 || !gone(child) {
		t.Fatalf("background child %d survived", child)
	}
	if st := p.Stats(); st.Served != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A waiting launcher that died is skipped; the run starts fresh.
func TestPoolSkipsDeadLauncher(t *testing.T) {
	p := NewPool("", 1)
	defer p.Close()
	settle(p)
	pid := readyPIDs(p)[0]
	syscall.Kill(pid, syscall.SIGKILL)
	p.mu.Lock()
	a := p.idle[0]
	p.mu.Unlock()
	<-a.proc.exited
	got := runSh(t, p, "echo ok", "")
	if got.stdout != "ok\n" || got.err != nil {
		t.Fatalf("%+v", got)
	}
	if st := p.Stats(); st.Served != 0 || st.Fresh != 1 {
		t.Fatalf("stats %+v, want the run started fresh", st)
	}
}

// Close retires waiting launchers: none is left behind.
func TestPoolCloseLeavesNothing(t *testing.T) {
	p := NewPool("", 3)
	settle(p)
	pids := readyPIDs(p)
	sort.Ints(pids)
	if len(pids) != 3 {
		t.Fatalf("ready %v", pids)
	}
	p.Close()
	for _, pid := range pids {
		if !gone(pid) {
			t.Fatalf("launcher %d still there after Close", pid)
		}
	}
	// After Close a run still starts (fresh), and nothing is started ahead.
	if got := runSh(t, p, "echo ok", ""); got.stdout != "ok\n" {
		t.Fatalf("%+v", got)
	}
	p.fill()
	p.spawns.Wait()
	if r := readyPIDs(p); len(r) != 0 {
		t.Fatalf("closed pool started %v", r)
	}
}

// A spec with more extra files than a launcher started ahead has slots
// for starts fresh.
func TestPoolTooManyExtraFiles(t *testing.T) {
	p := NewPool("", 1)
	defer p.Close()
	settle(p)
	var extra []*os.File
	for range aheadExtra + 1 {
		_, w, _ := os.Pipe()
		defer w.Close()
		extra = append(extra, w)
	}
	if got := runSh(t, p, "echo ok", "", extra...); got.stdout != "ok\n" {
		t.Fatalf("%+v", got)
	}
	if st := p.Stats(); st.Served != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Expect reaches the launchers started afterwards (they make that user's
// idmapping while they wait), and such a launcher still retires cleanly.
func TestPoolExpect(t *testing.T) {
	p := NewPool("", 1)
	cred := &sandbox.Credential{UID: 65534, GID: 65534}
	p.Expect(cred)
	settle(p)
	pids := readyPIDs(p)
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0]))
	if got := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); len(got) != 3 || got[1] != AheadCommand || *aheadCred(got[2:]) != *cred {
		t.Fatalf("launcher started ahead with %q", got)
	}
	if got := runSh(t, p, "echo ok", ""); got.stdout != "ok\n" || p.Stats().Served != 1 {
		t.Fatalf("%+v %+v", got, p.Stats())
	}
	settle(p)
	pids = readyPIDs(p)
	p.Close()
	if !gone(pids[0]) {
		t.Fatalf("launcher %d still there after Close", pids[0])
	}
	for _, bad := range [][]string{nil, {"x"}, {"1"}, {"1:2", "3"}} {
		if aheadCred(bad) != nil {
			t.Errorf("aheadCred(%q) != nil", bad)
		}
	}
}

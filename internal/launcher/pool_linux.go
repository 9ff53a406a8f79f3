package launcher

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Pool keeps a few launchers started ahead of their runs, so that a cold run
// does not wait for the exec of this (large) binary and its Go runtime's
// start: a few milliseconds each, the largest piece of a cold run that is
// pyexec's own.
//
// A launcher started ahead is exec'd exactly as Start execs one (same
// binary, empty environment, own process group, Pdeathsig from a locked
// thread), becomes a child subreaper and waits on a socketpair, whose other
// end only the server holds, for one run: the run's standard streams,
// status pipe and extra files (SCM_RIGHTS), then its Spec. From there it
// is an ordinary launcher: the sandbox (cgroup, namespaces, Landlock,
// seccomp) is prepared for that run's spec after the handoff, exactly as
// before, so confinement does not depend on how the launcher was started.
// Each one serves one run: the handoff closes the socket on both sides.
// Nothing of a run can reach one waiting: it runs as the server, in the
// server's namespaces and cgroup, and holds nothing a run could name (no
// path, no inherited fd).
//
// Replacements are started after the run that used one is over, off the
// request path. A Pool with nothing ready falls back to Start.
type Pool struct {
	exe  string
	size int

	mu       sync.Mutex
	changed  *sync.Cond // idle or starting changed (SetWait)
	wait     bool
	idle     []*ahead
	starting int
	closed   bool
	spawns   sync.WaitGroup // replacements being started
	retired  []*ahead       // started after Close began: exit on EOF

	served, fresh atomic.Uint64
	// finishing counts launchers whose run is over and that have not
	// exited yet (Wait).
	finishing sync.WaitGroup
	// expect is whom the next runs likely execute as (Expect).
	expect atomic.Pointer[sandbox.Credential]
}

// Expect tells the pool that runs execute as cred with an idmapped
// workspace: launchers started from now on make that idmapping while they
// wait (sandbox.Ahead). A run as someone else still gets its own.
func (p *Pool) Expect(cred *sandbox.Credential) {
	if p == nil || cred == nil {
		return
	}
	if old := p.expect.Load(); old != nil && *old == *cred {
		return
	}
	c := *cred
	p.expect.Store(&c)
}

// ahead is one launcher waiting for its run.
type ahead struct {
	proc *Process // cmd and exited set; the rest at handoff
	conn *net.UnixConn
}

// NewPool returns a pool that keeps size launchers of exe (default
// /proc/self/exe) started ahead. None is started before the first Start:
// an engine that never runs cold pays nothing. size <= 0 makes Start
// always exec a new launcher.
func NewPool(exe string, size int) *Pool {
	if exe == "" {
		exe = "/proc/self/exe"
	}
	p := &Pool{exe: exe, size: size}
	p.changed = sync.NewCond(&p.mu)
	return p
}

// SetWait makes Start wait for a launcher being started rather than exec
// one of its own, and starts the pool's launchers now. Tests use it so
// that every run goes through a launcher started ahead.
func (p *Pool) SetWait(wait bool) {
	p.mu.Lock()
	p.wait = wait
	p.mu.Unlock()
	p.fill()
}

// PoolStats says how cold runs got their launcher.
type PoolStats struct {
	Size   int    `json:"size" jsonschema:"Launchers kept started ahead (--prestart)."`
	Ready  int    `json:"ready" jsonschema:"Launchers waiting for a run now."`
	Served uint64 `json:"served" jsonschema:"Runs handed to a launcher started ahead."`
	Fresh  uint64 `json:"fresh" jsonschema:"Runs that found none ready and exec'd a launcher of their own."`
}

// Stats reports the pool's size and use so far.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	ready := len(p.idle)
	p.mu.Unlock()
	return PoolStats{Size: max(p.size, 0), Ready: ready, Served: p.served.Load(), Fresh: p.fresh.Load()}
}

// Start is launcher.Start, with a launcher started ahead when one is
// ready (opts.Executable must be the pool's binary or empty). It never
// waits for one.
func (p *Pool) Start(spec Spec, opts Options) (*Process, error) {
	opts.afterDone = p.afterDone(spec)
	if p.size <= 0 || spec.ExtraFiles > aheadExtra || (opts.Executable != "" && opts.Executable != p.exe) {
		return Start(spec, opts)
	}
	for {
		a := p.take()
		if a == nil {
			break
		}
		proc, ok, err := a.hand(spec, opts)
		if err != nil {
			return nil, err
		}
		if ok {
			p.served.Add(1)
			p.refillAfter(proc)
			return proc, nil
		}
		// It died while waiting (killed by someone, OOM): nothing of the
		// run reached it; try the next.
	}
	p.fresh.Add(1)
	if opts.Executable == "" {
		opts.Executable = p.exe
	}
	proc, err := Start(spec, opts)
	if err == nil {
		p.refillAfter(proc)
	}
	return proc, err
}

// refillAfter starts a replacement once proc's run is over: off the run's
// path.
func (p *Pool) refillAfter(proc *Process) {
	go func() {
		<-proc.Done()
		p.fill()
	}()
}

// afterDone follows a launcher whose run is over (its result on its way)
// to its exit, then sweeps the run's cgroup if the launcher could not
// remove it or died before it could. Wait waits for these.
func (p *Pool) afterDone(spec Spec) func(*Process) {
	return func(proc *Process) {
		p.finishing.Add(1)
		go func() {
			defer p.finishing.Done()
			<-proc.exited
			if spec.Sandbox != nil {
				_ = sandbox.Cleanup(spec.Sandbox.RunID)
			}
		}()
	}
}

// Wait blocks until every launcher whose run is over has exited and the
// run's cgroup is gone (launchers still serving a run, like a fork
// server's, are not waited for).
func (p *Pool) Wait() { p.finishing.Wait() }

// take removes a waiting launcher from the pool, or returns nil.
func (p *Pool) take() *ahead {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for len(p.idle) > 0 {
			a := p.idle[0]
			p.idle = p.idle[1:]
			select {
			case <-a.proc.exited:
				a.conn.Close()
				continue
			default:
			}
			return a
		}
		if !p.wait || p.closed {
			return nil
		}
		p.fillLocked()
		if p.starting == 0 {
			return nil // every start failed
		}
		p.changed.Wait()
	}
}

// fill starts launchers in the background until size are ready or
// starting.
func (p *Pool) fill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fillLocked()
}

func (p *Pool) fillLocked() {
	for !p.closed && len(p.idle)+p.starting < p.size {
		p.starting++
		p.spawns.Add(1)
		go func() {
			defer p.spawns.Done()
			a, err := p.spawn()
			p.mu.Lock()
			defer p.mu.Unlock()
			defer p.changed.Broadcast()
			p.starting--
			if err != nil {
				return // the next run execs its own; fill is retried after it
			}
			if p.closed {
				a.conn.Close() // EOF: it exits
				p.retired = append(p.retired, a)
				return
			}
			p.idle = append(p.idle, a)
		}()
	}
}

// spawn execs one launcher that waits for its run.
func (p *Pool) spawn() (*ahead, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("launcher control socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "launcher-control"), os.NewFile(uintptr(fds[1]), "launcher-control")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("launcher control socket: %w", err)
	}
	conn := fc.(*net.UnixConn)
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	// fd 3 the control socket; statusFD and the extra fds held by
	// placeholders until the handoff (see AheadCommand).
	extra := []*os.File{theirs}
	for range 1 + aheadExtra {
		extra = append(extra, devnull)
	}
	cmd := &exec.Cmd{
		Path:        p.exe,
		Args:        append([]string{p.exe, AheadCommand}, aheadArgs(p.expect.Load())...),
		Env:         []string{},
		Stdin:       devnull,
		Stdout:      devnull,
		Stderr:      devnull,
		ExtraFiles:  extra,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM},
	}
	proc := &Process{cmd: cmd, exited: make(chan struct{}), done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// As in Start: Pdeathsig follows the forking thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(proc.exited)
	}()
	if err := <-started; err != nil {
		conn.Close()
		return nil, fmt.Errorf("start launcher %s: %w", p.exe, err)
	}
	return &ahead{proc: proc, conn: conn}, nil
}

// hand gives the waiting launcher its run. ok is false when the launcher
// turned out to be gone before it got anything (the caller tries another);
// err is set when the run's own files could not be prepared.
func (a *ahead) hand(spec Spec, opts Options) (proc *Process, ok bool, err error) {
	// One run per launcher, whatever happens: the socket is closed on
	// every path (after the spec is written, on success).
	handed := false
	defer func() {
		if !handed {
			a.conn.Close()
		}
	}()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		a.kill()
		return nil, false, fmt.Errorf("launcher status pipe: %w", err)
	}
	defer statusW.Close()
	var devnull *os.File
	std := func(f *os.File) (*os.File, error) {
		if f != nil {
			return f, nil
		}
		if devnull == nil {
			var err error
			if devnull, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
				return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
			}
		}
		return devnull, nil
	}
	defer func() {
		if devnull != nil {
			devnull.Close()
		}
	}()
	var files []*os.File
	for _, f := range []*os.File{opts.Stdin, opts.Stdout, opts.Stderr} {
		g, err := std(f)
		if err != nil {
			statusR.Close()
			a.kill()
			return nil, false, err
		}
		files = append(files, g)
	}
	files = append(append(files, statusW), opts.ExtraFiles...)
	rights := make([]int, len(files))
	for i, f := range files {
		// Fd puts the file in blocking mode, as exec does for a child's
		// files.
		rights[i] = int(f.Fd())
	}
	body, err := json.Marshal(spec)
	if err != nil {
		statusR.Close()
		a.kill()
		return nil, false, fmt.Errorf("encode launch spec: %w", err)
	}
	if _, _, err := a.conn.WriteMsgUnix([]byte{0}, unix.UnixRights(rights...), nil); err != nil {
		statusR.Close()
		a.kill()
		return nil, false, nil
	}
	runtime.KeepAlive(files)
	proc = a.proc
	proc.grace = spec.Grace
	// From here on the launcher holds the run's files: it is this run's,
	// whatever happens to the rest of the handoff (a launcher that cannot
	// read its spec reports an error, or dies and Wait says so).
	handed = true
	go func() {
		defer a.conn.Close()
		_, _ = a.conn.Write(body)
	}()
	proc.afterDone = opts.afterDone
	go proc.readStatus(statusR, opts.OnStart, opts.OnStarted)
	return proc, true, nil
}

// kill ends a launcher that will not get a run.
func (a *ahead) kill() {
	_ = syscall.Kill(-a.proc.cmd.Process.Pid, syscall.SIGKILL)
}

// Close retires the waiting launchers (they exit on EOF) and waits until
// they are gone. Launchers already handed a run are the runs' own.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.changed.Broadcast()
	p.mu.Unlock()
	p.spawns.Wait()
	idle = append(idle, p.retired...)
	for _, a := range idle {
		a.conn.Close()
	}
	for _, a := range idle {
		<-a.proc.exited
	}
}

//go:build linux

package engine

// One run on a warm interpreter: the RUN message and descriptors handed to a
// spare fork, and the supervisor's status events read back as a
// launcher.Event.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// warmHooks connect a warm run to its pool.
type warmHooks struct {
	release func()       // frees the zygote once the run is over
	cleanup func(func()) // runs the cgroup's removal off the run's path
	lost    func()       // the run turned out never to have started
	broken  func(string) // the zygote cannot serve another run (why)
	// imports hears the top-level modules the run imported from the
	// interpreter's site dirs (adaptive preload, adaptive.go).
	imports func([]string)
	// exited hears whether S reported the run over as soon as its process
	// began to exit (driver.py's exit watch), or only once it was reaped.
	exited func(early bool)
}

// start hands p to one of the zygote's spare runs, with box (the run's
// cgroup and Landlock layer; nil without a sandbox).
func (z *zygote) start(p *prepared, opts launcher.Options, grace time.Duration, box *sandbox.WarmRun, hooks warmHooks) (*warmRun, error) {
	// The status channel is a socket: the kernel tells which process wrote
	// a message, as a pid of this server's PID namespace (the run's own
	// pids are its warm interpreter's).
	sv, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("status socket: %w", err)
	}
	if err := unix.SetsockoptInt(sv[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(sv[0])
		unix.Close(sv[1])
		return nil, fmt.Errorf("status socket: %w", err)
	}
	statusW := os.NewFile(uintptr(sv[1]), "warm-status-child")
	defer statusW.Close()
	// Non-blocking, so that reads wait in the runtime's poller.
	if err := unix.SetNonblock(sv[0], true); err != nil {
		unix.Close(sv[0])
		return nil, fmt.Errorf("status socket: %w", err)
	}
	statusR := os.NewFile(uintptr(sv[0]), "warm-status")
	stdin := opts.Stdin
	if stdin == nil {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			statusR.Close()
			return nil, err
		}
		defer devnull.Close()
		stdin = devnull
	}
	// Fd puts the files in blocking mode, which is what the run expects.
	fds := []int{int(stdin.Fd()), int(opts.Stdout.Fd()), int(opts.Stderr.Fd()), int(statusW.Fd())}
	conf := boxFields{clean: z.exclusive && z.report.PrivateShm, serial: z.exclusive, watch: !p.dedicated}
	if box != nil {
		for _, f := range box.CgroupFiles() {
			fds = append(fds, int(f.Fd()))
			conf.cgroups++
		}
		if f, flags := box.Ruleset(); f != nil {
			fds = append(fds, int(f.Fd()))
			conf.ruleset, conf.flags = true, flags
		}
		conf.cpu = box.CPUSeconds()
	}
	for _, f := range opts.ExtraFiles {
		fds = append(fds, int(f.Fd()))
	}
	rights := unix.UnixRights(fds...)
	_, _, err = z.conn.WriteMsgUnix(encodeRequest(p, grace, conf), rights, nil)
	if box != nil {
		box.ReleaseFiles() // the message holds its own references
	}
	if err != nil {
		statusR.Close()
		return nil, err
	}
	statusW.Close()

	// The run goes on without waiting for G's "started": that round trip
	// (a wakeup of this process, half a millisecond on an idle VM CPU)
	// overlaps with the run. readStatus takes it when it comes.
	r := &warmRun{done: make(chan struct{}), grace: grace, pidfd: -1, box: box, hooks: hooks, clean: conf.clean}
	go r.readStatus(statusR, opts.OnStart)
	return r, nil
}

// boxFields is the RUN message's confinement field (see driver.py).
type boxFields struct {
	cgroups int    // cgroup files passed
	ruleset bool   // a Landlock ruleset passed (after them)
	flags   uint32 // landlock_restrict_self flags
	cpu     int64  // RLIMIT_CPU, 0 for none
	clean   bool   // after the run, empty what the zygote's runs share and report it
	// serial: the zygote serves one run at a time (S stays for the next),
	// and the run may not name the zygote's own processes (see driver.py).
	serial bool
	// watch: S may report the run over as its process begins to exit (the
	// exit watch, driver.py); off for a session, whose process lives on.
	watch bool
}

func (b boxFields) String() string {
	return fmt.Sprintf("%d,%d,%d,%d,%d,%d,%d", b.cgroups, b2i(b.ruleset), b.flags, b.cpu, b2i(b.clean), b2i(b.serial), b2i(b.watch))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// encodeRequest is the RUN message (see driver.py).
func encodeRequest(p *prepared, grace time.Duration, box boxFields) []byte {
	fields := []string{"RUN", p.dir, p.argv[2], strconv.FormatInt(grace.Milliseconds(), 10), box.String()}
	args := p.argv[3:]
	fields = append(fields, strconv.Itoa(len(args)))
	fields = append(fields, args...)
	fields = append(fields, strconv.Itoa(len(p.env)))
	fields = append(fields, p.env...)
	return []byte(strings.Join(fields, "\x00"))
}

// Status event kinds only warm supervisors send.
const (
	warmEventClean = "clean" // after "exit": what the runs share is empty again
	warmEventDirty = "dirty" // after "exit": it could not be emptied (why in Error)
	// Before "exit": the modules the run imported (checked by S; the run
	// could have written them, so they only ever name modules a zygote may
	// try to import from its own sys.path).
	warmEventImports = "imports"
)

// importsEvent is a warmEventImports line.
type importsEvent struct {
	Modules []string `json:"modules"`
}

// warmRun is a run on a warm interpreter, seen from the server; it behaves
// as a launcher.Process.
type warmRun struct {
	spid  int // the supervisor (in this server's PID namespace): process group leader of the run
	grace time.Duration
	clean bool // the supervisor reports clean/dirty after exit

	mu    sync.Mutex
	pidfd int // of the supervisor, -1 once the run is over

	done     chan struct{}
	final    launcher.Event
	gotFinal bool
	startErr *launcher.Event
	killed   atomic.Bool

	termOnce sync.Once

	notStarted  bool // G never took or never started the run (errWarmLost)
	termPending bool // Terminate came before "started"

	box       *sandbox.WarmRun // the run's cgroup and Landlock layer, or nil
	boxReport *sandbox.Report  // what box.Finish reported
	hooks     warmHooks
}

// statusReader reads the supervisor's status messages, with the pid of the
// process that sent each one.
type statusReader struct {
	f   *os.File
	buf []byte
	oob []byte
}

func (sr *statusReader) next() (line []byte, pid int, err error) {
	conn, err := sr.f.SyscallConn()
	if err != nil {
		return nil, 0, err
	}
	var n, oobn int
	var rerr error
	if err := conn.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), sr.buf, sr.oob, 0)
		return rerr != unix.EAGAIN
	}); err != nil {
		return nil, 0, err
	}
	if rerr != nil {
		return nil, 0, rerr
	}
	if n == 0 {
		return nil, 0, errors.New("EOF")
	}
	if msgs, err := unix.ParseSocketControlMessage(sr.oob[:oobn]); err == nil {
		for _, m := range msgs {
			if cred, err := unix.ParseUnixCredentials(&m); err == nil {
				pid = int(cred.Pid)
			}
		}
	}
	return bytes.TrimSpace(sr.buf[:n]), pid, nil
}

func (r *warmRun) readStatus(f *os.File, onStart func(int)) {
	defer f.Close()
	sr := &statusReader{f: f, buf: make([]byte, 64<<10), oob: make([]byte, unix.CmsgSpace(unix.SizeofUcred))}
	var first launcher.Event
	line, gpid, err := sr.next()
	if err != nil || json.Unmarshal(line, &first) != nil || first.Kind != launcher.EventStarted || gpid <= 0 {
		r.mu.Lock()
		r.notStarted = true
		r.mu.Unlock()
		if r.hooks.lost != nil {
			r.hooks.lost()
		}
		r.finish()
		if r.hooks.release != nil {
			r.hooks.release()
		}
		close(r.done)
		return
	}
	// The supervisor is G's parent; its pid in the run's event is the warm
	// interpreter's, so it is looked up in this server's /proc.
	spid := parentOf(gpid)
	if spid <= 0 {
		spid = -1 // gone already: nothing to signal, the status channel closes
	}
	r.mu.Lock()
	r.spid = spid
	if spid > 0 {
		if fd, err := unix.PidfdOpen(r.spid, 0); err == nil {
			r.pidfd = fd
		}
	}
	term := r.termPending
	r.mu.Unlock()
	if onStart != nil {
		onStart(gpid)
	}
	if term {
		r.Terminate()
	}
	for !r.gotFinal {
		line, _, err := sr.next()
		if err != nil {
			break
		}
		var ev launcher.Event
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		switch ev.Kind {
		case launcher.EventError:
			r.startErr = &ev
		case launcher.EventExit:
			// The supervisor's last word about the run, written once every
			// process of the run is reaped, or is exiting with nothing of it
			// able to run again: the run is over (no need to wait for the
			// supervisor's own exit).
			r.final, r.gotFinal = ev, true
			if r.hooks.exited != nil {
				var watch struct {
					Early int `json:"early"`
				}
				_ = json.Unmarshal(line, &watch)
				r.hooks.exited(watch.Early == 1)
			}
		case warmEventImports:
			var imp importsEvent
			if r.hooks.imports != nil && json.Unmarshal(line, &imp) == nil && len(imp.Modules) > 0 {
				r.hooks.imports(imp.Modules)
			}
		}
	}
	r.mu.Lock()
	if r.pidfd >= 0 {
		unix.Close(r.pidfd)
		r.pidfd = -1
	}
	r.mu.Unlock()
	r.finish()
	// The zygote may take its next run now: its supervisor forks the next
	// run's process only once it has emptied what the runs share, so a
	// request sent meanwhile waits in the control socket. If it could not
	// (or says nothing), the zygote stops serving and is retired, and a
	// request waiting there reaches nobody and starts cold.
	if r.hooks.release != nil {
		r.hooks.release()
	}
	close(r.done)
	why := ""
	switch {
	case !r.gotFinal && r.startErr == nil && !r.killed.Load():
		why = "its supervisor died during a run"
	case r.gotFinal && r.clean:
		why = "its supervisor did not report cleaning up after the run"
		if line, _, err := sr.next(); err == nil {
			var ev launcher.Event
			if json.Unmarshal(line, &ev) == nil {
				switch ev.Kind {
				case warmEventClean:
					why = ""
				case warmEventDirty:
					why = "what a run left could not be removed: " + ev.Error
				}
			}
		}
	}
	if why != "" && r.hooks.broken != nil {
		r.hooks.broken(why)
	}
}

// parentOf returns the parent pid of pid from this server's /proc, 0 when
// it is gone.
func parentOf(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// finish reads the run's cgroup evidence and schedules the cgroup's
// removal, before the run counts as done.
func (r *warmRun) finish() {
	if r.box == nil {
		return
	}
	ev := r.final
	if !r.gotFinal {
		ev = launcher.Event{ExitCode: -1, Signal: int(syscall.SIGKILL)}
	}
	rep := r.box.Finish(ev.ExitCode, ev.Signal, ev.UserSeconds+ev.SystemSeconds)
	r.boxReport = &rep
	// Every process of the run is reaped (S reported, or the backstop
	// killed S's group and Close sweeps the cgroup): removing the cgroup
	// can wait until the result is out.
	box := r.box
	if r.hooks.cleanup != nil {
		r.hooks.cleanup(func() { _ = box.Close() })
	} else {
		_ = box.Close()
	}
}

// Terminate asks the supervisor to end the run: SIGTERM to the whole tree,
// SIGKILL after the grace period; its process group is killed as a backstop.
func (r *warmRun) Terminate() {
	r.mu.Lock()
	if r.spid == 0 {
		r.termPending = true // readStatus terminates it once it has started
		r.mu.Unlock()
		return
	}
	spid := r.spid
	r.mu.Unlock()
	if spid < 0 {
		return
	}
	r.termOnce.Do(func() {
		select {
		case <-r.done:
			return
		default:
		}
		r.mu.Lock()
		if r.pidfd >= 0 {
			_ = unix.PidfdSendSignal(r.pidfd, unix.SIGTERM, nil, 0)
		}
		r.mu.Unlock()
		go func() {
			select {
			case <-r.done:
			case <-time.After(r.grace + 2*time.Second):
				r.killed.Store(true)
				// Its process group: S and every process of the run that did
				// not leave it; the run's cgroup is swept of the rest once
				// the status channel closes.
				_ = syscall.Kill(-spid, syscall.SIGKILL)
			}
		}()
	})
}

func (r *warmRun) Done() <-chan struct{} { return r.done }

func (r *warmRun) Wait() (launcher.Event, error) {
	<-r.done
	if r.notStarted {
		return launcher.Event{}, errWarmLost
	}
	if r.startErr != nil {
		return *r.startErr, errors.New(r.startErr.Error)
	}
	if r.gotFinal {
		ev := r.final
		ev.Sandbox = r.boxReport
		return ev, nil
	}
	if r.killed.Load() {
		// Killed by the backstop at its timeout or cancel: the run ended by
		// SIGKILL, as a cold run's would.
		return launcher.Event{Kind: launcher.EventExit, ExitCode: -int(syscall.SIGKILL), Signal: int(syscall.SIGKILL), Sandbox: r.boxReport}, nil
	}
	return launcher.Event{}, errSupervisorLost
}

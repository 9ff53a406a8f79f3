package engine

// One run on a warm interpreter: the RUN message and descriptors handed to a
// spare fork, and the supervisor's status events read back as a
// launcher.Event.

import (
	"bufio"
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
}

// start hands p to one of the zygote's spare runs, with box (the run's
// cgroup and Landlock layer; nil without a sandbox).
func (z *zygote) start(p *prepared, opts launcher.Options, grace time.Duration, box *sandbox.WarmRun, hooks warmHooks) (*warmRun, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer statusW.Close()
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
	conf := boxFields{wipe: z.exclusive && z.report.PrivateShm, serial: z.exclusive}
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
	r := &warmRun{done: make(chan struct{}), grace: grace, pidfd: -1, box: box, hooks: hooks}
	go r.readStatus(statusR, opts.OnStart)
	return r, nil
}

// errWarmLost says a warm run never started: nobody took the request (the
// zygote died with it queued), or the fork could not confine itself or see
// the run's file. Nothing of the run ran, so it can start cold.
var errWarmLost = errors.New("warm interpreter did not start the run")

// boxFields is the RUN message's confinement field (see driver.py).
type boxFields struct {
	cgroups int    // cgroup files passed
	ruleset bool   // a Landlock ruleset passed (after them)
	flags   uint32 // landlock_restrict_self flags
	cpu     int64  // RLIMIT_CPU, 0 for none
	wipe    bool   // empty /dev/shm after the run
	serial  bool   // the zygote serves one run at a time: S stays for the next
}

func (b boxFields) String() string {
	return fmt.Sprintf("%d,%d,%d,%d,%d,%d", b.cgroups, b2i(b.ruleset), b.flags, b.cpu, b2i(b.wipe), b2i(b.serial))
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

type warmEvent struct {
	launcher.Event
	Supervisor int `json:"supervisor,omitempty"`
}

// warmRun is a run on a warm interpreter, seen from the server; it behaves
// as a launcher.Process.
type warmRun struct {
	spid  int // the supervisor: process group leader of the run
	grace time.Duration

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

func (r *warmRun) readStatus(f *os.File, onStart func(int)) {
	defer close(r.done)
	defer r.finish()
	defer f.Close()
	br := bufio.NewReader(f)
	var first warmEvent
	line, err := br.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &first) != nil || first.Kind != launcher.EventStarted {
		r.mu.Lock()
		r.notStarted = true
		r.mu.Unlock()
		if r.hooks.lost != nil {
			r.hooks.lost()
		}
		return
	}
	r.mu.Lock()
	r.spid = first.Supervisor
	if fd, err := unix.PidfdOpen(r.spid, 0); err == nil {
		r.pidfd = fd
	}
	term := r.termPending
	r.mu.Unlock()
	if onStart != nil {
		onStart(first.PID)
	}
	if term {
		r.Terminate()
	}
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var ev warmEvent
			if json.Unmarshal(line, &ev) == nil {
				switch ev.Kind {
				case launcher.EventError:
					e := ev.Event
					r.startErr = &e
				case launcher.EventExit:
					// The supervisor's last word, written once every
					// process of the run is reaped: the run is over (no
					// need to wait for the supervisor's own exit).
					r.final, r.gotFinal = ev.Event, true
				}
			}
		}
		if err != nil || r.gotFinal {
			break
		}
	}
	r.mu.Lock()
	if r.pidfd >= 0 {
		unix.Close(r.pidfd)
		r.pidfd = -1
	}
	r.mu.Unlock()
}

// finish cleans up the run's confinement (sweeping and removing its cgroup,
// reading its evidence) and frees the zygote, before the run counts as done.
func (r *warmRun) finish() {
	if r.box != nil {
		ev := r.final
		if !r.gotFinal {
			ev = launcher.Event{ExitCode: -1, Signal: int(syscall.SIGKILL)}
		}
		rep := r.box.Finish(ev.ExitCode, ev.Signal, ev.UserSeconds+ev.SystemSeconds)
		r.boxReport = &rep
		// Every process of the run is reaped (S reported, or the backstop
		// killed S's group and Close sweeps the cgroup): removing the
		// cgroup can wait until the result is out.
		box := r.box
		if r.hooks.cleanup != nil {
			r.hooks.cleanup(func() { _ = box.Close() })
		} else {
			_ = box.Close()
		}
	}
	if r.hooks.release != nil {
		r.hooks.release()
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
	r.mu.Unlock()
	r.termOnce.Do(func() {
		select {
		case <-r.done:
			return
		default:
		}
		r.mu.Lock()
		if r.pidfd >= 0 {
			_ = unix.PidfdSendSignal(r.pidfd, unix.SIGTERM, nil, 0)
		} else if r.spid > 0 {
			_ = unix.Kill(r.spid, unix.SIGTERM)
		}
		r.mu.Unlock()
		go func() {
			select {
			case <-r.done:
			case <-time.After(r.grace + 2*time.Second):
				r.killed.Store(true)
				_ = syscall.Kill(-r.spid, syscall.SIGKILL)
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
	// The supervisor died without reporting (killed by the backstop).
	ev := launcher.Event{Kind: launcher.EventExit, ExitCode: -1, Sandbox: r.boxReport}
	if r.killed.Load() {
		ev.Signal = int(syscall.SIGKILL)
		ev.ExitCode = -ev.Signal
	}
	return ev, nil
}

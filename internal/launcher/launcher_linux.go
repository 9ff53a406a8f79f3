package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"

	"golang.org/x/sys/unix"
)

// MaybeRun turns the current process into a launcher when it was started as
// one (argv[1] == Command) and never returns in that case. The pyexec main and
// every test binary that runs Python call it first.
func MaybeRun() {
	switch {
	case len(os.Args) == 3 && os.Args[1] == UnmountCommand:
		os.Exit(unmountOnExit(os.Args[2]))
	case len(os.Args) >= 2 && os.Args[1] == AheadCommand:
		os.Exit(run(true))
	case len(os.Args) < 2 || os.Args[1] != Command:
		return
	}
	os.Exit(run(false))
}

// run is the launcher's life: one run, then exit. ahead says it was
// started before its run existed (Pool): its spec and files come over the
// control socket (ahead_linux.go) instead of the pipes and fds of its exec.
func run(ahead bool) int {
	// Termination requests (timeout, cancel, the server's death through
	// Pdeathsig) must be seen from the very first instruction on.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)

	subreaper := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	var (
		spec    Spec
		specErr error
		early   *sandbox.Ahead
	)
	if ahead {
		// What confinement can do before the run is known, while waiting.
		early = sandbox.StartAhead(aheadCred(os.Args[2:]))
		defer early.Close()
		// Waits for the one run this launcher is for; the files it brings
		// are placed at fds 0-2, statusFD and extraFD+i, as an exec'd
		// launcher has them.
		var retired bool
		spec, retired, specErr = awaitRun(sigs)
		if retired {
			return 0
		}
	}
	// The side channels were inherited without close-on-exec; Python must not
	// inherit them in turn.
	unix.CloseOnExec(specFD)
	unix.CloseOnExec(statusFD)
	// Nor may it inherit whatever the server itself inherited without
	// close-on-exec (its parent's sockets and files): only 0-2 and the
	// extra files, which StartProcess dup2s into place, reach Python.
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	status := os.NewFile(statusFD, "status")
	report := func(ev Event) {
		// The server may already be gone; nothing useful to do on error.
		_ = json.NewEncoder(status).Encode(ev)
	}
	fail := func(err error) int {
		report(Event{Kind: EventError, ExitCode: 127, Error: err.Error()})
		return 127
	}

	if subreaper != nil {
		return fail(fmt.Errorf("become child subreaper: %w", subreaper))
	}
	if !ahead {
		spec, specErr = readSpec()
	}
	if specErr != nil {
		return fail(specErr)
	}
	if len(spec.Argv) == 0 {
		return fail(errors.New("launch spec has no argv"))
	}
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	for i := range spec.ExtraFiles {
		// Inherited as fd 5+i; Python gets it as fd 3+i and only there.
		unix.CloseOnExec(extraFD + i)
		files = append(files, os.NewFile(uintptr(extraFD+i), fmt.Sprintf("extra-%d", i)))
	}
	pid, box, err := start(spec, files, early)
	if err != nil {
		return fail(err)
	}
	// Our copies of the output pipes must close so the server sees EOF as
	// soon as the last process of the run is gone.
	for _, f := range files {
		f.Close()
	}
	started := Event{Kind: EventStarted, PID: pid}
	if box != nil {
		rep := box.Started()
		started.Sandbox = &rep
	}
	report(started)

	ws := supervise(pid, sigs, spec.Grace, box)

	ev := Event{Kind: EventExit}
	switch {
	case ws.Exited():
		ev.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		ev.Signal = int(ws.Signal())
		ev.ExitCode = -ev.Signal
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_CHILDREN, &ru) == nil {
		ev.UserSeconds = seconds(ru.Utime)
		ev.SystemSeconds = seconds(ru.Stime)
		ev.MaxRSSBytes = ru.Maxrss * 1024
	}
	if box != nil {
		// Kills whatever is left in the run's cgroup and reads its
		// evidence (OOM kills, pids.max hits).
		rep := box.Conclude(syscall.WaitStatus(ws), ev.UserSeconds+ev.SystemSeconds)
		ev.Sandbox = &rep
	}
	report(ev)
	// The run is over and reported: the server returns its result on
	// EOF, while the cgroup is removed here (rmdir can take milliseconds
	// of EBUSY retries) and the launcher exits. What cannot be removed
	// now, the server sweeps when this process is gone (Pool).
	status.Close()
	if box != nil {
		_ = box.Close()
	}
	return 0
}

// start starts Python with files as its fds 0, 1, 2, 3..., confined when
// the spec carries a sandbox. The sandbox's rlimits are set on this process
// (Python inherits them), so nothing else may be started after it.
func start(spec Spec, files []*os.File, early *sandbox.Ahead) (int, *sandbox.Run, error) {
	if spec.Sandbox == nil {
		early.Close() // reaps its fork before Python's processes exist
		proc, err := os.StartProcess(spec.Argv[0], spec.Argv, &os.ProcAttr{
			Dir:   spec.Dir,
			Env:   spec.Env,
			Files: files,
		})
		if err != nil {
			return 0, nil, fmt.Errorf("start %s: %w", spec.Argv[0], err)
		}
		return proc.Pid, nil, nil
	}
	box, err := sandbox.PrepareAhead(*spec.Sandbox, early)
	if err != nil {
		return 0, nil, err
	}
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = f.Fd()
	}
	pid, err := box.Start(spec.Argv[0], spec.Argv, &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   spec.Env,
		Files: fds,
	})
	if err != nil {
		box.Close()
		return 0, nil, err
	}
	return pid, box, nil
}

func readSpec() (Spec, error) {
	f := os.NewFile(specFD, "spec")
	defer f.Close()
	var spec Spec
	if err := json.NewDecoder(f).Decode(&spec); err != nil {
		return Spec{}, fmt.Errorf("read launch spec: %w", err)
	}
	return spec, nil
}

type reaped struct {
	pid int
	ws  unix.WaitStatus
}

// supervise reaps every process of the run until none is left and returns
// the wait status of the main process. Once the main process has exited,
// every remaining descendant is killed; a termination signal sends SIGTERM
// to the whole tree and SIGKILL after the grace period.
func supervise(mainPID int, sigs <-chan os.Signal, grace time.Duration, box *sandbox.Run) unix.WaitStatus {
	exits := make(chan reaped)
	go func() {
		defer close(exits)
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, 0, nil)
			if err == unix.EINTR {
				continue
			}
			if err != nil { // ECHILD: the whole tree is gone
				return
			}
			exits <- reaped{pid, ws}
		}
	}()

	var (
		mainStatus unix.WaitStatus
		mainDone   bool
		killAt     <-chan time.Time
	)
	self := os.Getpid()
	for {
		select {
		case r, ok := <-exits:
			if !ok {
				return mainStatus
			}
			if r.pid == mainPID {
				mainStatus, mainDone = r.ws, true
			}
			if mainDone {
				// Leftovers (daemons, setsid grandchildren) end with the run.
				signalTree(self, unix.SIGKILL)
			}
		case <-sigs:
			if killAt == nil {
				signalTree(self, unix.SIGTERM)
				if box != nil {
					box.Signal(unix.SIGTERM)
				}
				killAt = time.After(grace)
			}
		case <-killAt:
			signalTree(self, unix.SIGKILL)
			if box != nil {
				box.Signal(unix.SIGKILL) // the run's cgroup: forbid forks, kill all
			}
			killAt = time.After(grace) // keep sweeping late forks
		}
	}
}

// signalTree sends sig to every descendant of root. Processes forked while the
// tree is walked are caught by the next sweep: their parent's death reparents
// them to the launcher (a subreaper), whose reaping triggers another sweep.
func signalTree(root int, sig unix.Signal) {
	for _, pid := range descendants(root) {
		_ = unix.Kill(pid, sig)
	}
}

// descendants lists the processes below root, breadth first, from the
// kernel's per-thread children lists.
func descendants(root int) []int {
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue
		}
		for _, t := range tasks {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
			if err != nil {
				continue
			}
			for _, c := range parsePIDs(data) {
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

func parsePIDs(data []byte) []int {
	var pids []int
	n, in := 0, false
	for _, b := range data {
		if b >= '0' && b <= '9' {
			n, in = n*10+int(b-'0'), true
			continue
		}
		if in {
			pids = append(pids, n)
		}
		n, in = 0, false
	}
	if in {
		pids = append(pids, n)
	}
	return pids
}

func seconds(tv unix.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

package launcher

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Process is one supervised run, seen from the server.
type Process struct {
	cmd   *exec.Cmd
	grace time.Duration

	exited   chan struct{} // closed when the launcher process is reaped
	done     chan struct{} // closed when, in addition, its final event is read
	final    Event
	gotFinal bool

	termOnce  sync.Once
	afterDone func(*Process)
}

// Start re-executes the launcher with spec. The caller owns the files in opts
// and may close its copies once Start returns.
func Start(spec Spec, opts Options) (*Process, error) {
	exe := opts.Executable
	if exe == "" {
		exe = "/proc/self/exe"
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("launcher spec pipe: %w", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, fmt.Errorf("launcher status pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path:       exe,
		Args:       []string{exe, Command},
		Env:        []string{},
		Stdin:      opts.Stdin,
		Stdout:     opts.Stdout,
		Stderr:     opts.Stderr,
		ExtraFiles: append([]*os.File{specR, statusW}, opts.ExtraFiles...),
		SysProcAttr: &syscall.SysProcAttr{
			// Its own process group, so a backstop kill reaches the launcher
			// and Python together; and if the server dies, the launcher is
			// told (SIGTERM) and takes the run's tree down with it.
			Setpgid:   true,
			Pdeathsig: syscall.SIGTERM,
		},
	}
	if opts.Stdin == nil {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
		}
		defer devnull.Close()
		cmd.Stdin = devnull
	}

	p := &Process{cmd: cmd, grace: spec.Grace, exited: make(chan struct{}), done: make(chan struct{})}
	started := make(chan error, 1)
	// Pdeathsig fires when the OS thread that forked the child exits, not the
	// process: keep that thread alive (locked) until the launcher is reaped.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait() // the outcome is in the final event or ProcessState
		close(p.exited)
	}()
	err = <-started
	specR.Close()
	statusW.Close()
	if err != nil {
		specW.Close()
		statusR.Close()
		return nil, fmt.Errorf("start launcher %s: %w", exe, err)
	}

	go func() {
		defer specW.Close()
		_ = json.NewEncoder(specW).Encode(spec)
	}()
	p.afterDone = opts.afterDone
	go p.readStatus(statusR, opts.OnStart, opts.OnStarted)
	return p, nil
}

// readStatus consumes the launcher's events until it exits.
func (p *Process) readStatus(statusR *os.File, onStart func(int), onStarted func(Event)) {
	defer close(p.done)
	defer func() {
		if p.afterDone != nil {
			p.afterDone(p)
		}
	}()
	defer statusR.Close()
	sc := bufio.NewScanner(statusR)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		var ev Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Kind == EventStarted {
			if onStart != nil {
				onStart(ev.PID)
			}
			if onStarted != nil {
				onStarted(ev)
			}
			continue
		}
		p.final, p.gotFinal = ev, true
	}
	if !p.gotFinal {
		// Only the launcher's own wait status can tell what happened.
		<-p.exited
	}
}

// Terminate asks the launcher to end the run: SIGTERM to the whole tree, then
// SIGKILL after the grace period. If the launcher itself does not exit in
// time, its process group is killed as a backstop.
func (p *Process) Terminate() {
	p.termOnce.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		go func() {
			select {
			case <-p.exited:
			case <-time.After(p.grace + 2*time.Second):
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			}
		}()
	})
}

// Done is closed when the run's tree is gone and its status is known. The
// launcher itself may still be removing the run's cgroup and exiting
// (Pool.Wait waits for that).
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the run is over and returns the launcher's final event.
func (p *Process) Wait() (Event, error) {
	<-p.done
	if p.gotFinal {
		if p.final.Kind == EventError {
			return p.final, errors.New(p.final.Error)
		}
		return p.final, nil
	}
	// The launcher died without reporting (killed by the backstop, or a
	// crash): derive what we can from its own wait status.
	ev := Event{Kind: EventExit, ExitCode: -1}
	if ps := p.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ev.Signal = int(ws.Signal())
			ev.ExitCode = -ev.Signal
		}
	}
	return ev, nil
}

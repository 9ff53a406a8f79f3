//go:build !linux

package launcher

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Process is one supervised run, seen from the server. Off Linux the
// server starts Python itself inside a tree (tree_*.go) that is killed as a
// whole on Terminate and swept when Python exits.
type Process struct {
	cmd   *exec.Cmd
	tree  *tree
	grace time.Duration

	done  chan struct{}
	final Event
	err   error

	termOnce sync.Once
}

// Start starts spec's Python as a tree of its own. opts.Executable is not
// used (nothing is re-executed).
func Start(spec Spec, opts Options) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("launch spec has no argv")
	}
	var box *sandbox.Run
	if spec.Sandbox != nil {
		var err error
		if box, err = sandbox.Prepare(*spec.Sandbox); err != nil {
			return nil, err
		}
	}
	cmd := &exec.Cmd{
		Path:       spec.Argv[0],
		Args:       spec.Argv,
		Env:        spec.Env,
		Dir:        spec.Dir,
		Stdin:      opts.Stdin,
		Stdout:     opts.Stdout,
		Stderr:     opts.Stderr,
		ExtraFiles: opts.ExtraFiles,
	}
	if opts.Stdin == nil {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
		}
		defer devnull.Close()
		cmd.Stdin = devnull
	}
	var limits sandbox.Limits
	if spec.Sandbox != nil {
		limits = spec.Sandbox.Limits
	}
	t, err := newTree(cmd, limits)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		t.close()
		return nil, fmt.Errorf("start %s: %w", spec.Argv[0], err)
	}
	applied, skipped, err := t.started(cmd.Process)
	if err != nil {
		t.kill()
		_ = cmd.Wait()
		t.close()
		return nil, err
	}
	p := &Process{cmd: cmd, tree: t, grace: spec.Grace, done: make(chan struct{})}
	started := Event{Kind: EventStarted, PID: cmd.Process.Pid}
	if box != nil {
		for _, a := range applied {
			box.Apply(a)
		}
		for _, s := range skipped {
			box.Skip(s)
		}
		rep := box.Started()
		started.Sandbox = &rep
	}
	if opts.OnStart != nil {
		opts.OnStart(cmd.Process.Pid)
	}
	if opts.OnStarted != nil {
		opts.OnStarted(started)
	}
	go p.wait(started.Sandbox)
	return p, nil
}

func (p *Process) wait(rep *sandbox.Report) {
	defer close(p.done)
	_ = p.cmd.Wait()
	// Python is gone: nothing of its tree may outlive it.
	p.tree.kill()
	ev := Event{Kind: EventExit, ExitCode: -1, Sandbox: rep}
	if ps := p.cmd.ProcessState; ps != nil {
		ev.ExitCode = ps.ExitCode()
		if sig := signalOf(ps); sig != 0 {
			ev.Signal, ev.ExitCode = sig, -sig
		}
	}
	ev.UserSeconds, ev.SystemSeconds, ev.MaxRSSBytes = p.tree.usage(p.cmd.ProcessState)
	if rep != nil {
		ev.Sandbox.LimitExceeded = p.tree.limitHit()
	}
	p.tree.close()
	p.final = ev
}

// Terminate ends the run: the whole tree is asked to stop, then killed
// after the grace period (at once on Windows, which has no SIGTERM).
func (p *Process) Terminate() {
	p.termOnce.Do(func() {
		if !p.tree.terminate() {
			p.tree.kill()
			return
		}
		go func() {
			select {
			case <-p.done:
			case <-time.After(p.grace):
				p.tree.kill()
			}
		}()
	})
}

// Done is closed when the run's tree is gone and its status is known.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the run is over and returns its final event.
func (p *Process) Wait() (Event, error) {
	<-p.done
	return p.final, p.err
}

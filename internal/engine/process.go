package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// readChunk is the pipe read size: big enough that a flood costs few
// syscalls, small enough to stay out of the way of memory bounds.
const readChunk = 32 << 10

// drainGrace bounds how long output is still read after the run's tree is
// gone. Only a process that escaped the launcher could keep a pipe open.
const drainGrace = 2 * time.Second

// execute starts p (warm when it can) and supervises it to the end. A warm
// start that turns out never to have run anything (errWarmLost) is started
// again, cold.
func (e *Engine) execute(ctx context.Context, p *prepared, obs Observer) (Result, error) {
	res, err := e.executeOnce(ctx, p, obs, true)
	if errors.Is(err, errWarmLost) {
		return e.executeOnce(ctx, p, obs, false)
	}
	return res, err
}

// executeOnce is one attempt of execute.
func (e *Engine) executeOnce(ctx context.Context, p *prepared, obs Observer, warm bool) (Result, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return Result{}, fmt.Errorf("stderr pipe: %w", err)
	}
	var stdinR, stdinW *os.File
	if p.stdin != "" {
		if stdinR, stdinW, err = os.Pipe(); err != nil {
			for _, f := range []*os.File{outR, outW, errR, errW} {
				f.Close()
			}
			return Result{}, fmt.Errorf("stdin pipe: %w", err)
		}
	}

	opts := launcher.Options{Executable: e.cfg.Launcher, Stdin: stdinR, Stdout: outW, Stderr: errW, ExtraFiles: p.extraFiles}
	if obs != nil {
		opts.OnStart = obs.Started
	}
	start := time.Now()
	proc, err := e.startProcess(p, opts, warm) // warm when it can be (pool.go)
	// The children hold their own copies now.
	outW.Close()
	errW.Close()
	if stdinR != nil {
		stdinR.Close()
	}
	if err != nil {
		outR.Close()
		errR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		return Result{}, err
	}
	if stdinW != nil {
		go func() {
			// A script that never reads stdin makes this fail with EPIPE
			// once it exits; that is fine.
			_, _ = io.WriteString(stdinW, p.stdin)
			stdinW.Close()
		}()
	}

	stdout, stderr := newCapture(e.cfg.OutputCap), newCapture(e.cfg.OutputCap)
	var readers sync.WaitGroup
	readers.Add(2)
	go pump(&readers, outR, stdout, Stdout, obs)
	go pump(&readers, errR, stderr, Stderr, obs)

	timer := time.NewTimer(p.timeout)
	defer timer.Stop()
	var timedOut, cancelled bool
	select {
	case <-proc.Done():
	case <-timer.C:
		select {
		case <-proc.Done(): // finished as the timer fired: not a timeout
		default:
			timedOut = true
			proc.Terminate()
		}
	case <-ctx.Done():
		cancelled = true
		proc.Terminate()
	}
	ev, waitErr := proc.Wait()
	elapsed := time.Since(start)

	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		outR.Close() // unblocks the readers
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()

	if errors.Is(waitErr, errWarmLost) || errors.Is(waitErr, errSupervisorLost) {
		return Result{}, waitErr
	}
	if p.sandbox != nil && ev.Sandbox == nil {
		// The launcher died before it could sweep the run's cgroup.
		_ = sandbox.Cleanup(p.sandbox.RunID)
	}
	if waitErr != nil {
		// Python never started (the launcher reported why).
		// (The launcher's error names the interpreter already.)
		return Result{}, fmt.Errorf("python could not be started: %w", waitErr)
	}
	// Totals count what the script wrote, not pyexec's own notes.
	stdoutBytes, stderrBytes, stderrLines := stdout.Total(), stderr.Total(), stderr.Lines()
	if timedOut {
		fmt.Fprintf(stderr, "\n[TIMEOUT] killed after %.1fs (timeout %gs): the run's whole process tree was terminated\n",
			elapsed.Seconds(), p.timeout.Seconds())
	} else if cancelled {
		fmt.Fprintf(stderr, "\n[CANCELLED] killed after %.1fs: the request was cancelled\n", elapsed.Seconds())
	}

	limit, boxNotes, peakMem := "", p.sandboxNotes, int64(0)
	if ev.Sandbox != nil {
		peakMem = ev.Sandbox.PeakMemoryBytes
		text, _ := stderr.Text()
		limit = sandbox.LimitFromStderr(*ev.Sandbox, text[max(0, len(text)-4096):], ev.ExitCode)
		if n := ev.Sandbox.Notes(); n != "" {
			boxNotes = append(boxNotes, n)
		}
		if ev.Sandbox.CleanupError != "" {
			boxNotes = append(boxNotes, "cleanup: "+ev.Sandbox.CleanupError)
		}
	}
	if limit != "" {
		fmt.Fprint(stderr, limitNote(limit, p.sandbox.Limits.WithDefaults()))
	}

	res := Result{
		LimitExceeded:     limit,
		Sandbox:           sandboxSummary(p.sandbox),
		SandboxNotes:      boxNotes,
		ExitCode:          ev.ExitCode,
		TimedOut:          timedOut,
		ElapsedSeconds:    elapsed.Seconds(),
		ExecutionStrategy: p.strategy,
		PythonVersionUsed: p.interp.Version,
		Executable:        p.interp.Path,
		CPUUserSeconds:    ev.UserSeconds,
		CPUSystemSeconds:  ev.SystemSeconds,
		PeakRSSBytes:      ev.MaxRSSBytes,
		PeakMemoryBytes:   peakMem,
		StdoutBytes:       stdoutBytes,
		StderrBytes:       stderrBytes,
		StdoutLines:       stdout.Lines(),
		StderrLines:       stderrLines,
	}
	res.Success = res.ExitCode == 0 && !timedOut && !cancelled
	res.Stdout, res.StdoutTruncated = stdout.Text()
	res.Stderr, res.StderrTruncated = stderr.Text()
	return res, nil
}

// pump copies one output pipe into its capture and to the observer.
func pump(wg *sync.WaitGroup, r io.Reader, c *capture, s Stream, obs Observer) {
	defer wg.Done()
	buf := make([]byte, readChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.Write(buf[:n])
			if obs != nil {
				obs.Output(s, buf[:n])
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				fmt.Fprintf(c, "\n[pyexec: reading %s failed: %v]\n", s, err)
			}
			return
		}
	}
}

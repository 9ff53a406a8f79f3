package executor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/session"
)

// Job-backed cells: with a job manager, a session's cell runs as a job like
// run_python's runs do. The call waits up to req.SyncBudget; a cell still
// running then continues in the background (the session stays busy until
// it ends), and the call returns the output so far and the job id, which
// get_job follows. req.Async starts the cell as a job and returns at once.
// The job runs here (jobs.Manager.StartRun): a session lives in this
// process.

// SessionRun implements SessionExecutor with job-backed cells.
func (l *LocalJobs) SessionRun(ctx context.Context, req session.RunRequest, progress ProgressFunc) (session.CellResult, error) {
	if req.SyncBudget <= 0 && !req.Async && req.OnJob == nil {
		return l.Local.SessionRun(ctx, req, progress)
	}
	m := l.SessionManager()
	if err := m.Busy(req.Session); err != nil {
		return session.CellResult{}, err // refused at once, before a job exists
	}
	var (
		mu   sync.Mutex
		cell session.CellResult
		idc  = make(chan string, 1)
	)
	run := func(ctx context.Context, _ engine.Request, o jobs.RunOptions, obs engine.Observer) (engine.Result, error) {
		var id string
		select {
		case id = <-idc:
		case <-ctx.Done():
			return engine.Result{}, ctx.Err()
		}
		req := req
		// The job's limit, as for run_python's runs: the request's timeout
		// when it is shorter than the job timeout, else the job timeout.
		if req.JobTimeout = o.Timeout; req.JobTimeout <= 0 {
			req.JobTimeout = noLimit
		}
		c, err := m.RunObserved(ctx, req, id, obs)
		mu.Lock()
		cell = c
		mu.Unlock()
		if err != nil {
			return engine.Result{}, err
		}
		res := cellJobResult(c)
		// What the cell displayed becomes the job's artifacts (when it is kept).
		res.Display, res.Files, res.FilesNote = c.Display, c.Files, c.FilesNote
		if c.Result != nil && obs != nil { // the value, as the last line of the job's stdout
			obs.Output(engine.Stdout, []byte(fmt.Sprintf("Out[%d]: %s\n", c.ExecutionCount, *c.Result)))
		}
		if c.Error != nil && obs != nil {
			obs.Output(engine.Stderr, []byte(c.Error.Traceback))
		}
		return res, nil
	}
	desc := engine.Request{Code: req.Code, Timeout: req.Timeout}
	label := "session " + req.Session
	if req.Async {
		j, err := l.m.StartRun(ctx, desc, label, run)
		if err != nil {
			return session.CellResult{}, err
		}
		idc <- j.ID
		return session.CellResult{Session: req.Session, Status: session.StatusBusy, JobID: j.ID, JobStatus: string(j.Status)}, nil
	}
	so := jobs.SyncOptions{Label: label, Budget: time.Duration(req.SyncBudget * float64(time.Second)), Ephemeral: true, Run: run,
		OnStart: func(j jobs.Job) { idc <- j.ID }}
	// As for runs: a cell whose output or images do not fit keeps its job.
	keepFor(&so, req.OutputBudget)
	if req.OnJob != nil { // an MCP task: the task is the wait, the job is kept
		so.Budget, so.Ephemeral = 0, false
		so.OnStart = func(j jobs.Job) { req.OnJob(j.ID); idc <- j.ID }
	}
	var c counter
	stop := c.heartbeat(progress, func(p *Progress) {
		p.Message = fmt.Sprintf("cell running in session %s for %.1fs", req.Session, p.ElapsedSeconds)
	})
	out, err := l.m.RunSync(ctx, desc, so)
	stop()
	if err != nil {
		return session.CellResult{}, err
	}
	if out.Result != nil {
		mu.Lock()
		defer mu.Unlock()
		if out.Kept || req.OnJob != nil {
			cell.OutputJobID = out.Job.ID
		}
		return cell, nil
	}
	r := session.CellResult{Session: req.Session, Status: session.StatusBusy, JobID: out.Job.ID, JobStatus: string(out.Job.Status)}
	if in, err := m.Get(ctx, req.Session); err == nil {
		r.ExecutionCount, r.Python = in.RunningCell, in.Python
	}
	if ch := out.Output; ch != nil {
		r.Stdout, r.Stderr, r.StdoutBytes, r.StderrBytes = ch.Stdout, ch.Stderr, ch.StdoutSize, ch.StderrSize
		r.NextStdoutOffset, r.NextStderrOffset = ch.StdoutOffset, ch.StderrOffset
	}
	r.ElapsedSeconds = req.SyncBudget
	return r, nil
}

// cellJobResult is a finished cell as its job records it.
func cellJobResult(c session.CellResult) engine.Result {
	res := engine.Result{ElapsedSeconds: c.ElapsedSeconds, TimedOut: c.TimedOut, ExecutionStrategy: "session", PythonVersionUsed: c.Python,
		StdoutBytes: c.StdoutBytes, StderrBytes: c.StderrBytes}
	switch {
	case c.Status == session.StatusLost:
		res.ExitCode = -1
	case c.Exited != nil:
		res.ExitCode = *c.Exited
	case c.Error != nil:
		res.ExitCode = 1
	}
	res.Success = res.ExitCode == 0 && !c.TimedOut && c.Error == nil
	return res
}

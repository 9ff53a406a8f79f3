package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// dispatchLocked starts queued jobs, oldest first, while slots are free.
// Callers hold m.mu.
func (m *Manager) dispatchLocked() {
	for !m.closed && m.running < m.cfg.MaxConcurrent && len(m.queue) > 0 {
		lj := m.queue[0]
		m.queue[0] = nil
		m.queue = m.queue[1:]
		lj.dequeued = true
		m.running++
		m.wg.Add(1)
		go m.runJob(lj)
	}
}

// runJob runs one dequeued job to its end and frees its slot.
func (m *Manager) runJob(lj *liveJob) {
	defer m.wg.Done()
	defer func() {
		m.mu.Lock()
		delete(m.live, lj.job.ID)
		m.running--
		m.dispatchLocked()
		m.mu.Unlock()
	}()

	ctx, cancel := context.WithCancel(m.baseCtx)
	defer cancel()
	if lj.timeout > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, lj.timeout+backstopGrace)
		defer c2()
	}

	// A lazy job's logs start in memory; decided under lj.mu so that a
	// keep racing with the start spills them rather than missing them.
	budget := newLogBudget(m.cfg.LogCap)
	lj.mu.Lock()
	if lj.inMemory {
		lj.stdout, lj.stderr = memoryLog("stdout", 0, budget), memoryLog("stderr", 1, budget)
	}
	inMemory := lj.stdout != nil
	lj.mu.Unlock()
	var setupErr error
	var stdout, stderr *logWriter
	if !inMemory {
		dir := jobDir(m.cfg.StateDir, lj.job.ID)
		setupErr = os.MkdirAll(dir, 0o700)
		if setupErr == nil {
			stdout, setupErr = createLog(filepath.Join(dir, stdoutLogName), "stdout", 0, budget)
		}
		if setupErr == nil {
			stderr, setupErr = createLog(filepath.Join(dir, stderrLogName), "stderr", 1, budget)
		}
	}

	lj.mu.Lock()
	now := time.Now().UTC()
	lj.job.Status = StatusRunning
	lj.job.StartedAt = &now
	if !inMemory {
		lj.stdout, lj.stderr = stdout, stderr
	}
	lj.cancel = cancel
	cancelled := lj.cancelRequested
	skip := cancelled || setupErr != nil
	lj.mu.Unlock()

	var (
		res    engine.Result
		runErr error
	)
	switch {
	case setupErr != nil && IsStorageFull(setupErr):
		runErr = m.stateFull("cannot create the job's output logs", setupErr)
	case setupErr != nil:
		runErr = fmt.Errorf("prepare job logs: %w", setupErr)
	case cancelled:
		runErr = context.Canceled
	}
	if !skip {
		_ = lj.persist() // logged; the final state is saved (or kept) at the end
		m.hub.publish(Event{JobID: lj.job.ID, Status: StatusRunning})
		if m.sh != nil {
			lj.mu.Lock()
			if !lj.inMemory && lj.flusher == nil { // a lazy job starts its flusher when kept
				lj.flusher = m.sh.startFlusher(lj)
			}
			lj.mu.Unlock()
		}
		res, runErr = m.execute(ctx, lj)
	}
	m.finishRun(ctx, lj, res, runErr)
}

// execute calls the RunFunc with a progress pipe attached, and drains the
// pipe once the run has returned.
func (m *Manager) execute(ctx context.Context, lj *liveJob) (engine.Result, error) {
	opts := RunOptions{Timeout: lj.timeout, HelperDir: m.helperDir}
	pr, pw, err := os.Pipe()
	if err != nil {
		m.log.Warn("no progress pipe for job", "job", lj.job.ID, "err", err)
	} else {
		opts.ProgressPipe = pw
	}
	var drained chan struct{}
	if pr != nil {
		drained = make(chan struct{})
		go func() {
			defer close(drained)
			if err := readProgress(pr, lj.setProgress); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) {
				m.log.Warn("reading job progress", "job", lj.job.ID, "err", err)
			}
		}()
	}
	run := m.cfg.Run
	if lj.run != nil {
		run = lj.run
	}
	res, runErr := run(ctx, lj.req, opts, observer{lj})
	if pr != nil {
		// The run's processes are gone, so closing our write end brings EOF
		// after the last report; the deadline covers a leaked descriptor.
		pw.Close()
		pr.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		<-drained
		pr.Close()
	}
	return res, runErr
}

// finishRun records how a started job ended.
func (m *Manager) finishRun(ctx context.Context, lj *liveJob, res engine.Result, runErr error) {
	lj.mu.Lock()
	j := &lj.job
	now := time.Now().UTC()
	j.FinishedAt = &now
	if lj.inMemory && runErr == nil && lj.lazy.keep != nil && lj.lazy.keep(res) {
		lj.keepLocked(true)
	}
	lj.finished = true
	var logErr error
	for _, w := range []*logWriter{lj.stdout, lj.stderr} {
		if w != nil {
			if err := w.close(); err != nil {
				m.log.Error("job log", "job", j.ID, "err", err)
				logErr = errors.Join(logErr, err)
			}
		}
	}
	if runErr == nil {
		code := res.ExitCode
		j.ExitCode = &code
		j.TimedOut = res.TimedOut
		j.Run = &RunInfo{
			ElapsedSeconds:    res.ElapsedSeconds,
			ExecutionStrategy: res.ExecutionStrategy,
			PythonVersionUsed: res.PythonVersionUsed,
			Executable:        res.Executable,
			PeakRSSBytes:      res.PeakRSSBytes,
			PeakMemoryBytes:   res.PeakMemoryBytes,
			LimitExceeded:     res.LimitExceeded,
			Sandbox:           res.Sandbox,
		}
		if !lj.inMemory {
			j.Run.Artifacts = m.writeArtifacts(j.ID, res.Display)
		}
		r := res
		lj.result = &r
	}
	lj.runErr = runErr
	switch {
	case lj.fenced:
		j.Status, j.Error = StatusFailed, MsgNodeLost
	case lj.cancelRequested:
		j.Status, j.Error = StatusCancelled, MsgCancelled
	case m.baseCtx.Err() != nil:
		j.Status, j.Error = StatusFailed, MsgShutdown
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		j.Status, j.TimedOut = StatusFailed, true
		j.Error = fmt.Sprintf("job exceeded its time limit of %s", lj.timeout)
	case runErr != nil && IsStorageFull(runErr) && !errors.Is(runErr, ErrStateFull):
		j.Status, j.Error = StatusFailed, m.stateFull("the run could not be prepared", runErr).Error()
	case runErr != nil:
		j.Status, j.Error = StatusFailed, runErr.Error()
	case res.TimedOut || res.ExitCode != 0:
		j.Status = StatusFailed
	default:
		j.Status = StatusCompleted
	}
	if logErr != nil {
		// The output on disk stops where the filesystem filled up: the
		// job's record is incomplete, and says so.
		var outAt, errAt int64
		if lj.stdout != nil {
			outAt = lj.stdout.written
		}
		if lj.stderr != nil {
			errAt = lj.stderr.written
		}
		what := fmt.Sprintf("output could not be saved past stdout byte %d, stderr byte %d (%v)", outAt, errAt, logErr)
		if !IsStorageFull(logErr) {
			what = fmt.Sprintf("writing the output logs failed (%v)", logErr)
			j.Status, j.Error = StatusFailed, "output lost: "+what
		} else {
			markStorageLoss(j, what)
		}
	}
	ev := Event{JobID: j.ID, Status: j.Status, Done: true}
	lj.mu.Unlock()
	m.finalize(lj, ev)
}

// finishUnstarted ends a job that never ran (cancelled or shut down while
// pending). The caller has already removed it from the queue and live map.
func (m *Manager) finishUnstarted(lj *liveJob, status Status, msg string) {
	lj.mu.Lock()
	now := time.Now().UTC()
	lj.job.Status, lj.job.Error, lj.job.FinishedAt = status, msg, &now
	lj.runErr = errors.New(msg)
	lj.finished = true
	ev := Event{JobID: lj.job.ID, Status: status, Done: true}
	lj.mu.Unlock()
	m.finalize(lj, ev)
}

// finalize persists a final state, then wakes waiters. The order matters:
// once a job leaves the live map, readers go to the database, which must
// already hold the final state.
//
// When the store refuses the final state (a full state dir), the job is
// kept in memory as finished (failed, saying why) and saved later: it never
// stays "running" in the eyes of readers.
func (m *Manager) finalize(lj *liveJob, ev Event) {
	if m.sh != nil {
		m.sh.finishFlush(lj)
	}
	if err := lj.persist(); err != nil && !errors.Is(err, ErrNotFound) { // a removed row has nothing to keep
		lj.mu.Lock()
		if IsStorageFull(err) {
			markStorageLoss(&lj.job, "the job's final state could not be saved yet (kept in memory, saved again once there is room; lost if the server stops first)")
		} else {
			markStorageLoss(&lj.job, fmt.Sprintf("the job's final state could not be saved yet (%v)", err))
		}
		ev.Status = lj.job.Status
		lj.mu.Unlock()
		m.keepUnsaved(lj)
	}
	lj.mu.Lock()
	lj.broadcastLocked()
	lj.mu.Unlock()
	close(lj.done)
	m.hub.publish(ev)
	if m.sh != nil {
		m.sh.afterFinal(lj)
	}
}

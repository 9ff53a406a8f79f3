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

// Why lazy jobs: a synchronous call is backed by a job so that it can be
// handed off to the background, but most calls end within their budget with
// little output. Such a call must not pay for a database row and two log
// files it deletes a moment later. A lazy job lives in memory (its logs
// too) and is written to the store and to disk only when it has to be kept:
// on handoff, when its output outgrows what the caller will show (the full
// output must stay readable), or when the caller's Keep says so at the end.

// lazyOptions make a job lazy (see above).
type lazyOptions struct {
	spillAt int64                    // > 0: keep once the logs hold more than this many bytes
	keep    func(engine.Result) bool // keep a finished run with this result
}

// memoryLog returns a log writer that holds its stream in memory until
// spillTo moves it to a file.
func memoryLog(name string, index int, budget *logBudget) *logWriter {
	return &logWriter{name: name, index: index, budget: budget}
}

// spillTo writes what the memory log holds to path and appends there from
// now on (a log already closed gets its file closed again at once).
func (w *logWriter) spillTo(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create %s log: %w", w.name, err)
	}
	if _, err := f.Write(w.mem); err != nil {
		f.Close()
		return fmt.Errorf("write %s log: %w", w.name, err)
	}
	w.mem = nil
	if w.closed {
		return f.Close()
	}
	w.f = f
	return nil
}

// errFinished says a lazy job ended before it could be kept: its result
// is about to be returned, so there is nothing to hand off.
var errFinished = errors.New("the run has finished")

// keepLocked writes a lazy job to the store and its logs to disk, so that
// it outlives the call and its output is readable by cursor. Callers hold
// lj.mu. A job finishRun has already ended is not kept (errFinished) unless
// finishRun itself asks (atEnd). Failing to keep it is logged; the run goes
// on in memory.
func (lj *liveJob) keepLocked(atEnd bool) error {
	if !lj.inMemory {
		return nil
	}
	if lj.finished && !atEnd {
		return errFinished
	}
	m := lj.m
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// insert stamps the row's claim on lj.job (a shared store's epoch):
	// later updates are fenced by it.
	if err := m.store.insert(ctx, &lj.job, m.owner); err != nil {
		m.log.Error("keeping a synchronous run's job", "job", lj.job.ID, "err", err)
		return err
	}
	// The row exists now: from here on the job is saved like any other.
	lj.inMemory, lj.kept = false, true
	dir := jobDir(m.cfg.StateDir, lj.job.ID)
	err := os.MkdirAll(dir, 0o700)
	if err == nil && lj.stdout != nil {
		err = lj.stdout.spillTo(filepath.Join(dir, stdoutLogName))
	}
	if err == nil && lj.stderr != nil {
		err = lj.stderr.spillTo(filepath.Join(dir, stderrLogName))
	}
	if err != nil {
		m.log.Error("keeping a synchronous run's logs", "job", lj.job.ID, "err", err)
		return err
	}
	// insert writes a new job's fields only; bring the row up to date
	// (started, pid). Under lj.mu, so no newer snapshot can be written first.
	j := lj.job
	j.Request = nil
	if err := m.store.update(ctx, &j); err != nil {
		m.log.Error("keeping a synchronous run's job state", "job", j.ID, "err", err)
	}
	if m.sh != nil && lj.stdout != nil && lj.flusher == nil && !lj.finished {
		lj.flusher = m.sh.startFlusher(lj)
	}
	return nil
}

// keep is keepLocked for callers that do not hold lj.mu.
func (lj *liveJob) keep() error {
	lj.mu.Lock()
	defer lj.mu.Unlock()
	return lj.keepLocked(false)
}

// spillIfOverLocked keeps a lazy job whose logs outgrew its spill size.
// Callers hold lj.mu.
func (lj *liveJob) spillIfOverLocked() {
	if !lj.inMemory || lj.lazy.spillAt <= 0 || lj.stdout == nil || lj.stderr == nil {
		return
	}
	if lj.stdout.written+lj.stderr.written > lj.lazy.spillAt {
		lj.keepLocked(false)
	}
}

package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// DefaultSyncBudget is how long a synchronous call waits before handing the
// run off to the background (the seed's SMART_ASYNC_TIMEOUT_SECONDS default
// is 20 s too).
const DefaultSyncBudget = 20 * time.Second

// SyncOptions tunes RunSync.
type SyncOptions struct {
	// Label is the label of the backing job.
	Label string
	// Budget is how long to wait for the run before handing it off; <= 0
	// waits for the end (no handoff).
	Budget time.Duration
	// MaxBytes caps each stream of the output returned on handoff (default
	// DefaultChunkBytes).
	MaxBytes int
	// OnEvent, when set, receives the job's coalesced change events (output
	// growth, progress) while RunSync waits, from RunSync's goroutine.
	// The MCP layer turns them into progress notifications.
	OnEvent func(Event)
	// OnStart, when set, is called with the job once it is created, before
	// RunSync waits (heartbeats can then poll Get).
	OnStart func(Job)
	// Ephemeral removes the job (row and logs) when the run does not end up
	// in the background: it finished within the budget, was rejected, or
	// the caller cancelled. Synchronous tools set it so that only handed-off
	// runs appear in list_jobs and the store does not grow with every call.
	//
	// An ephemeral job is also lazy: it lives in memory, and reaches the
	// store and the disk only if it must be kept (spill.go): on handoff,
	// once its output exceeds SpillAt bytes, or when Keep says so.
	Ephemeral bool
	// Run, when set, executes the job instead of Config.Run (a session's
	// cell: work bound to this process).
	Run RunFunc
	// SpillAt > 0 keeps an ephemeral run (row and full logs, up to the log
	// cap) once its stdout and stderr together exceed this many bytes: the
	// caller will cut what it shows, and the rest stays readable by cursor.
	SpillAt int64
	// Keep, when set, keeps an ephemeral run that finished with this result
	// (for example one whose images will not all be shown inline).
	Keep func(engine.Result) bool
}

// SyncOutcome is the result of RunSync: either the run's Result (it finished
// within the budget) or the running job and the output so far.
type SyncOutcome struct {
	// Job is the job backing the run, in its state at return.
	Job Job
	// Result is set when the run finished within the budget.
	Result *engine.Result
	// Output is set on handoff: the output so far (first MaxBytes of each
	// stream) with the cursors to continue reading from.
	Output *Chunk
	// Kept is true when an ephemeral run that finished was kept anyway
	// (SpillAt, Keep): Job.ID then names its full output.
	Kept bool
}

// HandedOff reports whether the run continues in the background.
func (o SyncOutcome) HandedOff() bool { return o.Result == nil }

// RunSync runs req as a job and waits for it up to opts.Budget. If it ends
// in time, the outcome carries its Result. Otherwise the outcome carries the
// job (running, or pending if it is still queued) and its output so far, and
// the run continues in the background under the job's own time limit,
// detached from ctx.
//
// If ctx is cancelled before the handoff (the client cancelled the call),
// the job is cancelled, its process tree killed, and ctx's error returned.
// If the RunFunc fails (the request could not be run at all), its error is
// returned together with the failed job.
func (m *Manager) RunSync(ctx context.Context, req engine.Request, opts SyncOptions) (SyncOutcome, error) {
	var lazy *lazyOptions
	if opts.Ephemeral {
		lazy = &lazyOptions{spillAt: opts.SpillAt, keep: opts.Keep}
	}
	lj, err := m.start(ctx, req, opts.Label, false, lazy, opts.Run)
	if err != nil {
		return SyncOutcome{}, err
	}
	id := lj.job.ID
	if opts.OnStart != nil {
		opts.OnStart(lj.snapshot(false))
	}
	var events <-chan Event
	if opts.OnEvent != nil {
		ch, unsubscribe, err := m.Subscribe(ctx, id)
		if err == nil {
			events = ch
			defer unsubscribe()
		}
	}
	var budget <-chan time.Time
	if opts.Budget > 0 {
		t := time.NewTimer(opts.Budget)
		defer t.Stop()
		budget = t.C
	}
	for {
		select {
		case <-lj.done:
			return m.syncDone(lj, opts.Ephemeral)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			opts.OnEvent(ev)
		case <-budget:
			// Handoff. Reading with a detached ctx: the caller may be on its
			// way out, the output must still be returned.
			if err := lj.keep(); errors.Is(err, errFinished) {
				<-lj.done // its result is moments away: a result beats a handoff
				return m.syncDone(lj, opts.Ephemeral)
			}
			out, err := m.Output(context.WithoutCancel(ctx), id, Cursor{MaxBytes: opts.MaxBytes})
			if err != nil {
				return SyncOutcome{Job: lj.snapshot(false)}, fmt.Errorf("read output of job %s at handoff: %w", id, err)
			}
			select {
			case <-lj.done: // finished meanwhile: a result beats a handoff
				return m.syncDone(lj, opts.Ephemeral)
			default:
			}
			lj.mu.Lock()
			lj.job.quiet = false // its id is out: other replicas may follow it now
			lj.mu.Unlock()
			return SyncOutcome{Job: lj.snapshot(false), Output: &out}, nil
		case <-ctx.Done():
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			j, err := m.Cancel(stopCtx, id)
			cancel()
			if err != nil {
				m.log.Error("cancelling a job whose caller went away", "job", id, "err", err)
			} else if opts.Ephemeral && lj.wasWritten() {
				m.forget(id)
			}
			return SyncOutcome{Job: j}, ctx.Err()
		}
	}
}

func (m *Manager) syncDone(lj *liveJob, ephemeral bool) (SyncOutcome, error) {
	j := lj.snapshot(false)
	lj.mu.Lock()
	res, runErr := lj.result, lj.runErr
	kept, inMemory := lj.kept, lj.inMemory
	lj.mu.Unlock()
	if ephemeral && !kept && !inMemory {
		m.forget(j.ID)
	}
	if res == nil {
		if runErr == nil {
			runErr = fmt.Errorf("job %s ended %s without a result: %s", j.ID, j.Status, j.Error)
		}
		return SyncOutcome{Job: j}, runErr
	}
	return SyncOutcome{Job: j, Result: res, Kept: kept}, nil
}

// wasWritten reports whether the job has a row in the store.
func (lj *liveJob) wasWritten() bool {
	lj.mu.Lock()
	defer lj.mu.Unlock()
	return !lj.inMemory
}

// forget removes a finished job's row and logs (best effort: a leftover is
// only clutter that prune removes later).
func (m *Manager) forget(id string) {
	m.mu.Lock()
	if lj := m.unsaved[id]; lj != nil {
		// Its row still says running (the store refused the final state):
		// saveUnsaved deletes it once the store takes writes again.
		lj.forgotten = true
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	if m.sh != nil {
		m.sh.forgetRecent(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.store.deleteFinished(ctx, []string{id}); err != nil {
		m.log.Warn("removing a synchronous run's job", "job", id, "err", err)
		return
	}
	if err := os.RemoveAll(jobDir(m.cfg.StateDir, id)); err != nil {
		m.log.Warn("removing a synchronous run's logs", "job", id, "err", err)
	}
}

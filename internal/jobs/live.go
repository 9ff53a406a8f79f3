package jobs

import (
	"context"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// liveJob is the in-memory state of a pending or running job. The database
// row lags behind it (it is written on transitions and throttled progress);
// readers of a live job use this state.
type liveJob struct {
	m       *Manager
	req     engine.Request
	run     RunFunc // runs it instead of Config.Run (StartRun, SyncOptions.Run)
	timeout time.Duration

	// saveMu serialises database writes of this job; each write takes the
	// newest snapshot while holding it, so a slow early write can never
	// overwrite a later state.
	saveMu sync.Mutex

	mu              sync.Mutex
	job             Job
	stdout, stderr  *logWriter    // nil until the run starts
	changed         chan struct{} // closed and replaced when output grows or the job ends
	dequeued        bool          // taken off the queue by the dispatcher (guarded by Manager.mu)
	cancel          context.CancelFunc
	cancelRequested bool
	lastSave        time.Time
	result          *engine.Result // set when the RunFunc returned a result
	runErr          error
	forgotten       bool // an ephemeral job to delete once saved (guarded by Manager.mu; storage.go)

	// A lazy job (spill.go) is not in the store until it must be kept.
	lazy     lazyOptions
	inMemory bool // no database row yet (and logs in memory)
	kept     bool // a lazy job that was written out
	finished bool // finishRun has recorded the end (a lazy job can no longer be kept)

	// Shared stores only (shared.go).
	claimed bool     // taken from the shared queue (handed back if never started)
	fenced  bool     // the lease was lost: the store is no longer ours to write
	flusher *flusher // copies output to the store while the job runs (guarded by mu)
	dirty   bool     // an intermediate state waits to be written behind (guarded by mu)
	saving  bool     // a writeBehind goroutine runs (guarded by mu)

	done chan struct{} // closed once the final state is persisted
}

// snapshot copies the job's metadata. Pointer fields are never mutated in
// place (always replaced), so sharing them is safe.
func (lj *liveJob) snapshot(withRequest bool) Job {
	lj.mu.Lock()
	defer lj.mu.Unlock()
	j := lj.job
	switch {
	case !withRequest:
		j.Request = nil
	case j.Request != nil && len(j.Request.EnvVars) > 0:
		r := redact(*j.Request) // as the store keeps it: env values are often secrets
		j.Request = &r
	}
	return j
}

// persist writes the newest state of the job to the store.
//
// On a shared store an intermediate state (running, the pid, throttled
// progress) is written behind: persist returns at once and one goroutine
// per job writes the newest snapshot, so the run does not wait for
// PostgreSQL and states that come in a burst (running, then the pid a
// moment later) cost one write. The final state is written before persist
// returns, after any write in flight (saveMu), and a write behind that
// finds the job final is skipped: the final write carries everything.
func (lj *liveJob) persist() error {
	if lj.m.sh != nil {
		lj.mu.Lock()
		behind := !lj.job.Status.Terminal()
		if behind {
			lj.dirty = true
			if lj.saving {
				lj.mu.Unlock()
				return nil // the running writer picks the newest state up
			}
			lj.saving = true
		}
		lj.mu.Unlock()
		if behind {
			lj.m.wg.Add(1)
			go lj.writeBehind()
			return nil
		}
	}
	return lj.write(false)
}

// writeBehindDelay is how long an intermediate state waits before it is
// written: the states of a job's start (running, then its pid) go out as
// one write, and a job that ends sooner never writes them at all (its
// final write carries everything). Nothing waits for these writes: the
// owner answers for its jobs from memory, and other replicas see the job
// pending, with its owner and lease, until then.
const writeBehindDelay = 20 * time.Millisecond

// writeBehind writes intermediate states until none is newer than the
// last one written.
func (lj *liveJob) writeBehind() {
	defer lj.m.wg.Done()
	t := time.NewTimer(writeBehindDelay)
	select {
	case <-t.C:
	case <-lj.done: // final: nothing intermediate left to write
		t.Stop()
	}
	for {
		lj.mu.Lock()
		if !lj.dirty {
			lj.saving = false
			lj.mu.Unlock()
			return
		}
		lj.dirty = false
		lj.mu.Unlock()
		_ = lj.write(true) // logged; the final state is saved (or kept) at the end
	}
}

// write saves the job's newest snapshot; with intermediateOnly, nothing
// when that snapshot is final (its own persist writes it).
func (lj *liveJob) write(intermediateOnly bool) error {
	lj.saveMu.Lock()
	defer lj.saveMu.Unlock()
	lj.mu.Lock()
	unsaved := lj.inMemory
	lj.mu.Unlock()
	if unsaved {
		return nil // nothing on disk to update (spill.go)
	}
	j := lj.snapshot(false)
	if intermediateOnly && j.Status.Terminal() {
		return nil
	}
	ctx, cancel := storageContext()
	defer cancel()
	err := lj.m.store.update(ctx, &j)
	if lj.m.sh != nil {
		err = lj.m.sh.saved(lj, &j, err)
	}
	if err != nil {
		lj.m.log.Error("saving job state", "job", j.ID, "status", j.Status, "err", err)
		return err
	}
	return nil
}

// settleWait bounds settle: while the store is unreachable (a database
// restart, during which the final write is retried for up to a minute)
// readers get the state in memory rather than wait for it.
const settleWait = 2 * time.Second

// settle waits, once the run has ended, until its final state is saved
// (or kept in memory because the store refused it): a reader that sees a
// job final here may ask any other replica next, whose store must then
// say the same. The wait is one write at most; before the end it is none.
func (lj *liveJob) settle(ctx context.Context) {
	lj.mu.Lock()
	finished := lj.finished
	lj.mu.Unlock()
	if !finished {
		return
	}
	t := time.NewTimer(settleWait)
	defer t.Stop()
	select {
	case <-lj.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// broadcastLocked wakes every long-poll waiting on this job. Callers hold lj.mu.
func (lj *liveJob) broadcastLocked() {
	close(lj.changed)
	lj.changed = make(chan struct{})
}

// setProgress records a progress report from the script: subscribers see
// every one (coalesced by the hub), the database at most once per
// ProgressSaveInterval (the final state is saved when the job ends anyway).
func (lj *liveJob) setProgress(p Progress) {
	lj.mu.Lock()
	lj.job.Progress = &p
	now := time.Now()
	save := now.Sub(lj.lastSave) >= lj.m.cfg.ProgressSaveInterval
	if save {
		lj.lastSave = now
	}
	ev := Event{JobID: lj.job.ID, Status: lj.job.Status, Progress: &p}
	lj.mu.Unlock()
	lj.m.hub.publish(ev)
	if save {
		_ = lj.persist() // logged; the final state is saved (or kept) at the end
	}
}

// observer adapts a live job to engine.Observer: output goes to the logs,
// never to the database.
type observer struct{ lj *liveJob }

var (
	_ engine.Observer            = observer{}
	_ engine.EnvironmentObserver = observer{}
)

// Environment records the environment build step the run is in, so get_job
// and heartbeats can say why a first run with dependencies takes seconds.
func (o observer) Environment(phase, detail string) {
	step := ""
	if phase != "done" {
		step = phase
		if detail != "" {
			step += ": " + detail
		}
	}
	o.lj.mu.Lock()
	o.lj.job.Phase = step
	o.lj.mu.Unlock()
}

func (o observer) Started(pid int) {
	o.lj.mu.Lock()
	o.lj.job.PID = pid
	o.lj.job.Phase = ""
	o.lj.mu.Unlock()
	_ = o.lj.persist() // logged; the final state is saved (or kept) at the end
}

func (o observer) Output(s engine.Stream, p []byte) {
	lj := o.lj
	lj.mu.Lock()
	var grew bool
	switch s {
	case engine.Stdout:
		if lj.stdout != nil {
			grew = lj.stdout.write(p)
			lj.job.StdoutBytes, lj.job.StdoutTruncated = lj.stdout.produced, lj.stdout.truncated
		}
	case engine.Stderr:
		if lj.stderr != nil {
			grew = lj.stderr.write(p)
			lj.job.StderrBytes, lj.job.StderrTruncated = lj.stderr.produced, lj.stderr.truncated
		}
	}
	lj.spillIfOverLocked()
	if grew {
		lj.broadcastLocked()
	}
	ev := Event{JobID: lj.job.ID, Status: lj.job.Status, Output: true}
	f := lj.flusher
	lj.mu.Unlock()
	if grew {
		lj.m.hub.publish(ev)
		if f != nil {
			f.poke()
		}
	}
}

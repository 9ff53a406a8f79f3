package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// A full state dir (its filesystem out of space or over quota) must not
// leave a job "running" forever, break cancel, or take the server down.
// What is done about it:
//
//   - a job whose output could not be written, or whose final state could
//     not be saved, ends failed with an error starting "state dir full";
//   - a final state the database refused is kept in memory (readers, cancel
//     and list see it) and saved again every unsavedRetryInterval until it
//     sticks; only a server stop before then loses it (the next start marks
//     the job failed, "server restarted while the job was running");
//   - a new job that cannot even be recorded is refused with ErrStateFull,
//     which the front ends turn into a clear error (HTTP 507).

// ErrStateFull says the state dir has no room: no new job can be recorded.
var ErrStateFull = errors.New("state dir full")

// ErrForeign is returned by Cancel for a job another pyexec process sharing
// the state dir is running: only that process can stop it.
var ErrForeign = errors.New("job belongs to another pyexec process")

// unsavedRetryInterval is how often final states the database refused are
// written again.
const unsavedRetryInterval = 2 * time.Second

// MsgStateFull starts the error of a job that lost output or its final state
// to a full state dir.
const MsgStateFull = "state dir full"

// IsStorageFull reports whether err comes from a filesystem with no space
// left (ENOSPC, EDQUOT) or from SQLite finding its disk full.
func IsStorageFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrStateFull) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) && coded.Code()&0xff == 13 { // SQLITE_FULL
		return true
	}
	return strings.Contains(err.Error(), "database or disk is full")
}

// stateFull wraps a storage error into ErrStateFull with what to do.
func (m *Manager) stateFull(what string, err error) error {
	return fmt.Errorf("%w: %s (%v); free space on the filesystem of %s, or remove finished jobs with prune_jobs", ErrStateFull, what, err, m.cfg.StateDir)
}

// keepUnsaved holds a finished job whose final state the store refused.
func (m *Manager) keepUnsaved(lj *liveJob) {
	m.mu.Lock()
	m.unsaved[lj.job.ID] = lj
	m.mu.Unlock()
}

// lookupUnsaved returns a finished job whose final state is not saved yet.
func (m *Manager) lookupUnsaved(id string) *liveJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unsaved[id]
}

// retryUnsaved writes the final states the store refused, until they stick
// or the Manager closes.
func (m *Manager) retryUnsaved() {
	defer m.wg.Done()
	t := time.NewTicker(unsavedRetryInterval)
	defer t.Stop()
	for {
		select {
		case <-m.baseCtx.Done():
			m.saveUnsaved() // one last try at Close
			return
		case <-t.C:
			m.saveUnsaved()
		}
	}
}

func (m *Manager) saveUnsaved() {
	m.mu.Lock()
	pending := make([]*liveJob, 0, len(m.unsaved))
	for _, lj := range m.unsaved {
		pending = append(pending, lj)
	}
	m.mu.Unlock()
	for _, lj := range pending {
		if err := lj.persist(); err != nil && !errors.Is(err, ErrNotFound) {
			continue
		}
		m.mu.Lock()
		delete(m.unsaved, lj.job.ID)
		forgotten := lj.forgotten
		m.mu.Unlock()
		if forgotten {
			m.forget(lj.job.ID)
			continue
		}
		m.log.Info("saved a job's final state once the state dir had room again", "job", lj.job.ID)
	}
}

// markStorageLoss turns a job that lost output or its final state into a
// failed one (a cancelled one stays cancelled), saying why. Callers hold
// lj.mu.
func markStorageLoss(j *Job, what string) {
	note := fmt.Sprintf("%s: %s", MsgStateFull, what)
	if j.Status != StatusCancelled {
		j.Status = StatusFailed
	}
	if j.Error == "" {
		j.Error = note
	} else if !strings.Contains(j.Error, MsgStateFull) {
		j.Error += "; " + note
	}
}

// storageContext bounds one save attempt.
func storageContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

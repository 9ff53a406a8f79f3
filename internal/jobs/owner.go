package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Several pyexec servers may share one state directory (two MCP clients
// that each start `pyexec mcp` with the default --state-dir). Each Manager
// is an owner with a random id; it holds an exclusive flock on
// <state-dir>/jobs/owners/<id>.lock for its whole life and stamps its jobs
// with the id. A job left pending or running whose owner's lock can be taken
// has lost its process (the kernel releases flocks even on SIGKILL), so it is
// failed with MsgRestarted; jobs of live owners are left alone.

// orphanSweepInterval is how often a Manager looks for jobs of owners that
// died while it runs (it also looks when it opens).
const orphanSweepInterval = time.Minute

func ownersDir(stateDir string) string { return filepath.Join(stateDir, "jobs", "owners") }

func ownerLockPath(stateDir, owner string) string {
	return filepath.Join(ownersDir(stateDir), owner+".lock")
}

// takeOwnerLock creates and locks this Manager's owner lock file.
func takeOwnerLock(stateDir, owner string) (*os.File, error) {
	if err := os.MkdirAll(ownersDir(stateDir), 0o700); err != nil {
		return nil, fmt.Errorf("jobs: create owners dir: %w", err)
	}
	path := ownerLockPath(stateDir, owner)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("jobs: create owner lock: %w", err)
	}
	if err := lockNow(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("jobs: lock %s: %w", path, err)
	}
	fmt.Fprintf(f, "%d\n", os.Getpid()) // for people looking around
	return f, nil
}

// releaseOwnerLock removes and unlocks this Manager's lock file (removal
// first, so no other Manager can mistake a removed file for a dead owner
// with live jobs: by then every job of ours is final).
func releaseOwnerLock(f *os.File) error {
	return errors.Join(os.Remove(f.Name()), f.Close())
}

// ownerDead reports whether owner's process is gone. When it is, the caller
// gets the lock (release it with the returned func after failing the jobs).
func ownerDead(stateDir, owner string) (bool, func(), error) {
	if owner == "" {
		return true, func() {}, nil // written before owners existed
	}
	path := ownerLockPath(stateDir, owner)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return true, func() {}, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("open owner lock %s: %w", path, err)
	}
	if err := lockNow(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return false, nil, nil // alive
		}
		return false, nil, fmt.Errorf("lock owner lock %s: %w", path, err)
	}
	return true, func() { os.Remove(path); f.Close() }, nil
}

// recoverOrphans fails the unfinished jobs of dead owners, keeping their
// logs (the sizes found on disk are recorded).
func (m *Manager) recoverOrphans(ctx context.Context) error {
	byOwner, err := m.store.unfinished(ctx, m.owner)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	failed := 0
	for owner, ids := range byOwner {
		dead, release, err := ownerDead(m.cfg.StateDir, owner)
		if err != nil {
			m.log.Warn("checking the owner of unfinished jobs", "owner", owner, "err", err)
			continue
		}
		if !dead {
			continue
		}
		for _, id := range ids {
			dir := jobDir(m.cfg.StateDir, id)
			out, err1 := statLog(filepath.Join(dir, stdoutLogName), m.cfg.LogCap)
			errs, err2 := statLog(filepath.Join(dir, stderrLogName), m.cfg.LogCap)
			if err := errors.Join(err1, err2); err != nil {
				m.log.Warn("reading logs of an abandoned job", "job", id, "err", err)
			}
			if err := m.store.markAbandoned(ctx, id, now, out, errs); err != nil {
				release()
				return err
			}
			failed++
		}
		release()
	}
	if failed > 0 {
		m.log.Info("marked jobs of a dead pyexec process as failed", "count", failed)
	}
	if err := m.recoverSessions(ctx); err != nil {
		return err
	}
	m.removeDeadOwnerLocks()
	return nil
}

// removeDeadOwnerLocks deletes the lock files of owners that died without
// unfinished jobs (a crash between jobs), so they do not pile up.
func (m *Manager) removeDeadOwnerLocks() {
	entries, err := os.ReadDir(ownersDir(m.cfg.StateDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		owner, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || owner == m.owner {
			continue
		}
		if dead, release, err := ownerDead(m.cfg.StateDir, owner); err == nil && dead {
			release()
		}
	}
}

// sweepOrphans runs recoverOrphans periodically until the Manager closes.
func (m *Manager) sweepOrphans() {
	defer m.wg.Done()
	t := time.NewTicker(orphanSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-m.baseCtx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(m.baseCtx, 30*time.Second)
			if err := m.recoverOrphans(ctx); err != nil && m.baseCtx.Err() == nil {
				m.log.Warn("sweeping jobs of dead processes", "err", err)
			}
			cancel()
		}
	}
}

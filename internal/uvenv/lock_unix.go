//go:build !windows

package uvenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fileLock is an flock(2) lock on <envs>/.locks/<key>.lock. One lock per
// environment serves every process sharing the state dir:
//
//   - a run holds it shared for as long as it uses the env (so no process can
//     evict an env while a run executes in it);
//   - a build and an eviction hold it exclusive (so two processes never build
//     the same env twice, and an env is never deleted under a run).
//
// flock locks belong to the open file description, so two goroutines of one
// process that open the file separately exclude each other like processes do.
// The kernel drops the lock when the process dies: no stale lock files to
// clean up after a crash.
type fileLock struct{ f *os.File }

// Lock modes for lock and tryLock.
const (
	lockEx = unix.LOCK_EX
	lockSh = unix.LOCK_SH
)

func openLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

// tryLock attempts the lock without blocking; ok is false when another
// holder conflicts.
func (l *fileLock) tryLock(how int) (ok bool, err error) {
	for {
		err = unix.Flock(int(l.f.Fd()), how|unix.LOCK_NB)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("flock %s: %w", l.f.Name(), err)
		}
		return true, nil
	}
}

// lock waits for the lock until ctx ends. flock(2) cannot be interrupted by
// a context, so it polls with a backoff capped at 100 ms; waits are rare
// (another process is building or evicting the same env) and short next to
// a build.
func (l *fileLock) lock(ctx context.Context, how int) error {
	delay := 2 * time.Millisecond
	for {
		ok, err := l.tryLock(how)
		if err != nil || ok {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for lock %s: %w", l.f.Name(), ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

func (l *fileLock) unlock() error { return unix.Flock(int(l.f.Fd()), unix.LOCK_UN) }

// close releases the lock (if held) and the descriptor.
func (l *fileLock) close() error { return l.f.Close() }

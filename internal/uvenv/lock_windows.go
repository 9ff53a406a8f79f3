package uvenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// fileLock is a LockFileEx lock on <envs>/.locks/<key>.lock, with the same
// rules as the flock lock elsewhere (lock_unix.go): shared while a run uses
// the env, exclusive to build or evict it; Windows drops it when the
// process dies.
type fileLock struct{ f *os.File }

// Lock modes for lock and tryLock.
const (
	lockEx = windows.LOCKFILE_EXCLUSIVE_LOCK
	lockSh = 0
)

func openLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

func (l *fileLock) tryLock(how int) (ok bool, err error) {
	ol := new(windows.Overlapped)
	err = windows.LockFileEx(windows.Handle(l.f.Fd()), uint32(how)|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", l.f.Name(), err)
	}
	return true, nil
}

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

func (l *fileLock) unlock() error {
	return windows.UnlockFileEx(windows.Handle(l.f.Fd()), 0, 1, 0, new(windows.Overlapped))
}

func (l *fileLock) close() error { return l.f.Close() }

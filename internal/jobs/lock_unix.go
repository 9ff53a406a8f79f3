//go:build !windows

package jobs

import (
	"errors"
	"os"
	"syscall"
)

// errLocked is lockNow's error when another process holds the lock.
var errLocked = syscall.EWOULDBLOCK

// lockNow takes an exclusive flock on f without waiting.
func lockNow(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

// inode is the file's inode number (the progress helper checks that its
// descriptor still is the job's pipe).
func inode(fi os.FileInfo) (uint64, bool) {
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Ino), true
	}
	return 0, false
}

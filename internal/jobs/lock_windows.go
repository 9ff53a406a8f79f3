package jobs

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// errLocked is lockNow's error when another process holds the lock.
var errLocked = windows.ERROR_LOCK_VIOLATION

// lockNow takes an exclusive LockFileEx lock on f without waiting.
func lockNow(f *os.File) error {
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errLocked
	}
	return err
}

// inode: Windows has none to check (and no progress pipe, see the launcher).
func inode(os.FileInfo) (uint64, bool) { return 0, false }

package sandbox

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// enterPrivateShm moves the calling (locked, disposable) thread into a new
// mount namespace whose /dev/shm is a fresh tmpfs, so POSIX semaphores and
// shared memory (multiprocessing) work without being shared with other runs.
// Mount propagation is made private first so nothing leaks back to the host.
// Its pages are charged to the run's memory cgroup; size caps it besides.
// Needs CAP_SYS_ADMIN (root launcher) and must run before Landlock, which
// forbids mounting.
func enterPrivateShm(sizeBytes int64) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	opts := "mode=1777"
	if sizeBytes > 0 {
		opts += ",size=" + strconv.FormatInt(sizeBytes, 10)
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount private /dev/shm: %w", err)
	}
	return nil
}

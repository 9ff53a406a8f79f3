//go:build !windows

package engine

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// handOver gives a directory the server made to the run user (owner uid,
// mode 0700) without following a symlink at its last component: a
// session's temp dir, handed to an install, is a path its session could
// otherwise have swapped for a link (runs as root can write the temp root).
func handOver(dir string, uid, gid int) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("hand %s to the run user: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return fmt.Errorf("hand %s to the run user: %w", dir, err)
	}
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return fmt.Errorf("hand %s to the run user: %w", dir, err)
	}
	return nil
}

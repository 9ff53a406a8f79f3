package sandbox

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// enterPrivateShm moves the calling (locked, disposable) thread into a new
// mount namespace whose /dev/shm is a fresh tmpfs, so POSIX semaphores and
// shared memory (multiprocessing) work without being shared with other runs.
// Mount propagation is made private first so nothing leaks back to the host.
// Its pages are charged to the run's memory cgroup; size caps it besides,
// and so does the inode count (a run leaving a huge tree there costs its
// warm interpreter's supervisor a bounded walk; see driver.py).
// Needs CAP_SYS_ADMIN (root launcher) and must run before Landlock, which
// forbids mounting.
func enterPrivateShm(sizeBytes int64) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	opts := "mode=1777,nr_inodes=" + strconv.Itoa(shmInodes)
	if sizeBytes > 0 {
		opts += ",size=" + strconv.FormatInt(sizeBytes, 10)
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount private /dev/shm: %w", err)
	}
	return nil
}

// shmInodes bounds the files and directories a run's /dev/shm holds.
const shmInodes = 1 << 16

// bindNoSetID mounts dir over itself, recursively, nosuid and nodev (in the
// calling thread's private mount namespace): what a run may write must not
// become a set-user-ID binary or a device node on any path of its
// namespace, whatever the filesystem underneath allows.
func bindNoSetID(dir string) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("clone %s: %w", dir, err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("nosuid,nodev %s: %w", dir, err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount %s nosuid,nodev: %w", dir, err)
	}
	return nil
}

// noSetIDAnywhere makes every mount of the calling thread's private mount
// namespace nosuid (a set-user-ID file on any of them runs with the
// caller's ids; no_new_privs already says so, this says it twice).
func noSetIDAnywhere() error {
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID}); err != nil {
		return fmt.Errorf("nosuid on every mount: %w", err)
	}
	return nil
}

// enterPrivateIPC moves the calling (locked) thread into a new IPC
// namespace: SysV shared memory segments, semaphores and message queues
// and POSIX message queues of the run are its own, invisible to every
// other run, and freed by the kernel with the namespace when the run's last
// process is gone. /dev/mqueue, when there is one, becomes the new
// namespace's message queue filesystem (in the private mount namespace).
func enterPrivateIPC() error {
	if err := unix.Unshare(unix.CLONE_NEWIPC); err != nil {
		return fmt.Errorf("unshare IPC namespace: %w", err)
	}
	if fi, err := os.Stat("/dev/mqueue"); err == nil && fi.IsDir() {
		if err := unix.Mount("mqueue", "/dev/mqueue", "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount /dev/mqueue: %w", err)
		}
	}
	return nil
}

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Idmapped workspace: the workspace usually belongs to the operator (root
// here, mode 0755), so an unprivileged run uid could not write it, and
// pyexec never changes its permissions behind the operator's back. Inside
// the run's private mount namespace, the workspace is instead mounted over
// itself with an idmapping (mount_setattr MOUNT_ATTR_IDMAP) in which the
// server's uid/gid on disk read as the run's uid/gid: the run owns the
// operator's files there, and what it creates is the operator's on disk.
// Nothing changes on disk or outside the run; the run gets exactly the
// access to the workspace the old fallback (root without capabilities, the
// owner) had, while it stays an unprivileged uid everywhere else (no
// RLIMIT_NPROC exemption, no reading root-owned 0600 files elsewhere).
// Files of other owners in the workspace keep their own permissions (their
// owner reads as the overflow uid).

// usernsFD returns an fd of a new user namespace whose uid/gid 0 map to
// cred's (the idmapping: on-disk server uid 0 -> run uid). It starts a
// short-lived `sleep` in that namespace, opens its ns file, and reaps it.
func usernsFD(cred *Credential) (int, error) {
	sleep := "/bin/sleep"
	if _, err := os.Stat(sleep); err != nil {
		sleep = "/usr/bin/sleep"
	}
	pid, err := syscall.ForkExec(sleep, []string{"sleep", "60"}, &syscall.ProcAttr{
		Dir: "/", Env: []string{},
		Sys: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: int(cred.UID), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: int(cred.GID), Size: 1}},
			Pdeathsig:   syscall.SIGKILL,
		},
	})
	if err != nil {
		return -1, fmt.Errorf("user namespace for the idmapping: %w", err)
	}
	fd, oerr := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	if oerr != nil {
		return -1, fmt.Errorf("open user namespace: %w", oerr)
	}
	return fd, nil
}

// idmapOver mounts an idmapped clone of dir over dir (calling thread's
// mount namespace, which must be private), read-write, nosuid, nodev.
func idmapOver(dir string, userns int) error {
	// Recursive: mounts below dir (binds, other filesystems) come along and
	// are idmapped too; if one of them cannot be, the whole thing fails
	// (and the run falls back) rather than hiding it.
	tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("clone %s: %w", dir, err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("idmap %s: %w", dir, err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount idmapped %s: %w", dir, err)
	}
	return nil
}

// needsIdmap tells whether the run uid cannot write dir itself but the
// server's uid owns it with write+search: then an idmapped mount gives the
// run the owner's access.
func needsIdmap(cred *Credential, dir string) bool {
	if cred == nil || cred.UID == 0 || dir == "" || filepath.Clean(dir) == "/" {
		// "/" would take /proc, /dev and every other mount along.
		return false
	}
	if modeAllows(cred, dir, AccessWrite|AccessExec) == nil {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return false
	}
	return int(st.Uid) == os.Geteuid() && st.Mode&0o300 == 0o300
}

var idmapProbes sync.Map // dir -> error

// IdmapAvailable tells (once per dir) whether an idmapped mount of dir can
// be made here: root server, kernel and filesystem support.
func IdmapAvailable(cred *Credential, dir string) error {
	if os.Geteuid() != 0 {
		return errors.New("needs a root server")
	}
	if v, ok := idmapProbes.Load(dir); ok {
		err, _ := v.(error)
		return err
	}
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is discarded
		if err := enterPrivateShm(1 << 20); err != nil {
			done <- err
			return
		}
		fd, err := usernsFD(cred)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(fd)
		done <- idmapOver(dir, fd)
	}()
	err := <-done
	idmapProbes.Store(dir, err)
	return err
}

package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// UnmountCommand is argv[1] of the process that unmounts a directory once
// the server that mounted it is gone (StartUnmountOnExit).
const UnmountCommand = "__pyexec_unmount_on_exit"

// StartUnmountOnExit starts a small process (this binary again, exe or
// /proc/self/exe) that waits for the caller to exit, however it exits, and
// then detaches every mount on dir and removes it. A server killed with
// SIGKILL leaves no filesystem of its own mounted behind. stop ends the
// watcher after the caller has unmounted dir itself.
func StartUnmountOnExit(exe, dir string) (stop func() error, err error) {
	if exe == "" {
		exe = "/proc/self/exe"
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("unmount watcher pipe: %w", err)
	}
	cmd := exec.Command(exe, UnmountCommand, dir)
	cmd.ExtraFiles = []*os.File{r} // fd 3: EOF when the caller is gone
	// Its own session: a terminal's Ctrl-C or a group kill of the server
	// must not take it first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start unmount watcher: %w", err)
	}
	r.Close()
	return func() error {
		w.Close()
		return cmd.Wait()
	}, nil
}

// unmountOnExit is the watcher's side: block until fd 3 reads EOF, then
// unmount and remove the directory.
func unmountOnExit(dir string) int {
	signal.Ignore(unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
	io.Copy(io.Discard, os.NewFile(3, "server"))
	if err := UnmountAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "pyexec:", err)
		return 1
	}
	return 0
}

// UnmountAll detaches every mount on dir (lazily: a process still holding
// a file there keeps only that file alive) and removes the directory.
func UnmountAll(dir string) error {
	for {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				break // not a mount point (any more)
			}
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

//go:build !windows

package uvenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// killTreeOnCancel puts cmd (uv) in a process group of its own and kills
// the whole group when its context ends: uv does not forward SIGKILL to the
// interpreters it starts.
func killTreeOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// lowerPriority makes a background job (sealing an env) yield to runs.
func lowerPriority(pid int) { _ = unix.Setpriority(unix.PRIO_PROCESS, pid, 10) }

// VenvPython is the interpreter of the virtual environment at dir.
func VenvPython(dir string) string { return filepath.Join(dir, "bin", "python") }

// oNoFollow makes an open refuse a symlink in the last component.
const oNoFollow = syscall.O_NOFOLLOW

// linkCount is the file's number of hard links.
func linkCount(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

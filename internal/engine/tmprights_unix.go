//go:build !windows

package engine

import (
	"os"
	"syscall"

	"github.com/pyexec/pyexec/internal/workspace"
)

// tmpRights are the rights of the user a run executed as, read from its
// temp dir (the sandbox hands it to that user, or back to root when the
// run falls back to root without capabilities).
func tmpRights(tmpDir string) workspace.Rights {
	var st syscall.Stat_t
	if err := syscall.Stat(tmpDir, &st); err != nil || int(st.Uid) == os.Geteuid() && os.Geteuid() != 0 {
		return workspace.ServerRights // the run executed as the server itself
	}
	return workspace.Rights{UID: st.Uid, GID: st.Gid}
}

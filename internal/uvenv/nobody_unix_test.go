//go:build !windows

package uvenv

import (
	"os/exec"
	"syscall"
	"testing"
)

// asNobody makes cmd run as uid/gid 65534.
func asNobody(t *testing.T, cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

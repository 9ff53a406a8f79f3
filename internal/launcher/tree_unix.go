//go:build !linux && !windows

package launcher

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// tree is a run's process group (macOS and other Unix systems without the
// Linux launcher): Python leads its own group, so one signal reaches every
// process it starts, unless one of them leaves the group (setsid): there is
// no subreaper or cgroup here to catch those.
type tree struct{ pgid int }

func newTree(cmd *exec.Cmd, _ sandbox.Limits) (*tree, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return &tree{}, nil
}

func (t *tree) started(p *os.Process) (applied, skipped []string, err error) {
	t.pgid = p.Pid
	return []string{"process group (tree kill)"},
		[]string{"resource limits (memory, processes, file size, open files) on " + runtime.GOOS,
			"processes that leave the run's process group (setsid) outlive a kill"}, nil
}

func (t *tree) signal(sig syscall.Signal) bool {
	return t.pgid > 0 && syscall.Kill(-t.pgid, sig) == nil
}

func (t *tree) terminate() bool  { return t.signal(syscall.SIGTERM) }
func (t *tree) kill()            { t.signal(syscall.SIGKILL) }
func (t *tree) close()           {}
func (t *tree) limitHit() string { return "" }

// usage is Python's own rusage (children it waited for included; on macOS
// ru_maxrss is in bytes).
func (t *tree) usage(ps *os.ProcessState) (user, sys float64, maxRSS int64) {
	if ps == nil {
		return 0, 0, 0
	}
	user, sys = ps.UserTime().Seconds(), ps.SystemTime().Seconds()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		maxRSS = int64(ru.Maxrss)
		if runtime.GOOS != "darwin" {
			maxRSS *= 1024
		}
	}
	return user, sys, maxRSS
}

func signalOf(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int(ws.Signal())
	}
	return 0
}

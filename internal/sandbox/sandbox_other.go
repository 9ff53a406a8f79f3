//go:build !linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// Off Linux none of the confinement mechanisms exist: no Landlock, no
// namespaces, no seccomp, no cgroups, and no launcher to apply them between
// fork and exec. A policy other than none therefore fails closed, naming
// what is missing and the two ways on: --sandbox none, or the container
// image (a Linux system, where the sandbox works). The run's process tree is
// still killed as a whole (internal/launcher: a process group on macOS, a
// Job Object on Windows).

func missing(name string) Mechanism {
	return Mechanism{Name: name, Detail: "not on " + runtime.GOOS + ": pyexec's confinement uses Linux kernel features"}
}

// Detect reports every Linux mechanism as missing, and what this platform
// does instead where it does something.
func Detect() Capabilities {
	c := Capabilities{UID: os.Geteuid()}
	c.Root = c.UID == 0
	c.NoNewPrivs = missing("no_new_privs")
	c.Rlimits = missing("rlimits")
	c.Landlock = missing("landlock")
	c.LandlockTCP = missing("landlock_tcp")
	c.LandlockScope = missing("landlock_scope")
	c.NetNS = missing("net_namespace")
	c.PidNS = missing("pid_namespace")
	c.MountNS = missing("mount_namespace")
	c.UserNS = missing("user_namespace")
	c.Cgroup = missing("cgroup")
	c.Seccomp = missing("seccomp")
	if runtime.GOOS == "windows" {
		c.Cgroup.Detail = "not on windows; a Job Object per run kills the whole tree and caps memory and process count instead"
	}
	return c
}

// Run is a run's sandbox decision off Linux: nothing to apply, only what
// to report.
type Run struct{ rep Report }

// Prepare fails closed when spec asks for confinement this platform cannot
// give (unless BestEffort, which runs unconfined and says so in every
// result). Resource limits are the launcher's to apply where it can (a Job
// Object on Windows); Skipped names the ones it cannot.
func Prepare(spec Spec) (*Run, error) {
	if err := unenforceable(spec, runtime.GOOS); err != nil {
		if !spec.BestEffort {
			return nil, err
		}
		return &Run{rep: Report{Skipped: []string{err.Error()}}}, nil
	}
	return &Run{}, nil
}

// Started is the report known when the run starts.
func (r *Run) Started() Report { return r.rep }

// Skip records a mechanism the launcher could not apply.
func (r *Run) Skip(what string) { r.rep.Skipped = append(r.rep.Skipped, what) }

// Apply records a mechanism the launcher applied.
func (r *Run) Apply(what string) { r.rep.Applied = append(r.rep.Applied, what) }

// Close releases nothing: there is nothing to undo.
func (r *Run) Close() error { return nil }

// Cleanup has no per-run cgroup to remove off Linux.
func Cleanup(runID string) error { return nil }

// LookupCredential: runs keep the server's user off Linux.
func LookupCredential(s string) (*Credential, error) {
	return nil, fmt.Errorf("run-as %q: switching users for runs needs Linux (pyexec runs Python as the server's user on %s)", s, runtime.GOOS)
}

// CheckAccess cannot reason about another user's rights off Linux; runs
// keep the server's user, so only existence is checked.
func CheckAccess(cred *Credential, path string, want uint32) error {
	_, err := os.Stat(path)
	return err
}

// ChooseRunAs: off Linux runs always execute as the server's user.
func ChooseRunAs(mode, workspace string, mustRead []string) (RunAsChoice, error) {
	if mode != "" && mode != RunAsAuto && mode != RunAsNone && mode != "root" {
		return RunAsChoice{}, fmt.Errorf("--run-as %s needs Linux; on %s runs execute as the server's user", mode, runtime.GOOS)
	}
	return RunAsChoice{Notes: []string{"runs execute as the server's user (no run-as user off Linux)"}}, nil
}

// IdmapAvailable: idmapped mounts are a Linux feature.
func IdmapAvailable(cred *Credential, dir string) error {
	return errors.New("idmapped mounts need Linux")
}

// ReachAvailable: the mount-namespace skeleton is a Linux feature.
func ReachAvailable() bool { return false }

// PrivateProcAvailable: PID namespaces and procfs pidns= are Linux.
func PrivateProcAvailable() error {
	return errors.New("PID namespaces need Linux")
}

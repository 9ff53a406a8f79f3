package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// PID namespaces.
//
// Every confined run of a root server gets a PID namespace of its own with
// a /proc of its own: no process outside it has a pid there, so a run can
// name nothing else, whatever it calls: kill, prlimit, setpriority (also
// PRIO_USER, which the kernel limits to tasks visible in the caller's
// namespace), sched_setaffinity, ioprio_set, ptrace, pidfd_open,
// process_vm_readv, and /proc/PID/{cmdline,environ,...} of other runs, of
// warm interpreters or of the server (whose --token may be on its command
// line). The /proc is mounted with hidepid=invisible: what a run cannot
// ptrace (its namespace's init, and a warm interpreter with its
// supervisors: other uids, outer Landlock domains) is not even listed.
//
// Python is pid 2 under a placeholder init (`sleep infinity`), so it keeps
// ordinary signal semantics: as pid 1 the kernel would drop SIGTERM from
// the launcher and any default-action signal it sends itself. The init is
// forked before Landlock and seccomp, as root without capabilities: it is
// not in the run's Landlock domain and not the run's uid, so the run can
// neither signal, trace, limit nor renice it. Killing it, which the
// launcher does with every other descendant, makes the kernel kill
// whatever is left in the namespace.
//
// The /proc is mounted from outside the namespace (the starter thread's
// active PID namespace is still the launcher's): procfs's pidns= option
// names the namespace to show.

// startPIDNamespace makes the calling (locked starter) thread's next
// children land in a new PID namespace and starts its init with cred (nil:
// this thread's identity). It returns the init's pid.
func startPIDNamespace(cred *syscall.Credential, cgroupFD int) (int, error) {
	sleep := ""
	for _, p := range []string{"/bin/sleep", "/usr/bin/sleep"} {
		if _, err := os.Stat(p); err == nil {
			sleep = p
			break
		}
	}
	if sleep == "" {
		return 0, errors.New("no sleep binary for the namespace's init")
	}
	if err := unix.Unshare(unix.CLONE_NEWPID); err != nil {
		return 0, fmt.Errorf("unshare: %w", err)
	}
	initAttr := &syscall.ProcAttr{Dir: "/", Env: []string{}, Sys: &syscall.SysProcAttr{Credential: cred}}
	if cgroupFD >= 0 {
		initAttr.Sys.UseCgroupFD, initAttr.Sys.CgroupFD = true, cgroupFD
	}
	pid, err := syscall.ForkExec(sleep, []string{"sleep", "infinity"}, initAttr)
	if err != nil {
		// The thread's children would still go to the (init-less) new
		// namespace and fail; this thread is unusable for the run.
		return 0, fmt.Errorf("start init: %w", err)
	}
	return pid, nil
}

// openPIDNamespace opens the PID namespace of process pid (from /proc,
// before a private /proc hides the launcher's pids).
func openPIDNamespace(pid int) (int, error) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the PID namespace: %w", err)
	}
	return fd, nil
}

// mountProc mounts, at target in the calling thread's mount namespace, a
// procfs showing the PID namespace nsfd (nosuid, nodev, noexec;
// hidepid=invisible when hide).
func mountProc(target string, nsfd int, hide bool) error {
	fsfd, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen proc: %w", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigSetFd(fsfd, "pidns", nsfd); err != nil {
		return fmt.Errorf("this kernel's procfs lacks pidns=: %w", err)
	}
	if hide {
		if err := unix.FsconfigSetString(fsfd, "hidepid", "invisible"); err != nil {
			return fmt.Errorf("proc hidepid=invisible: %w", err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fmt.Errorf("create proc: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return fmt.Errorf("fsmount proc: %w", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount proc on %s: %w", target, err)
	}
	return nil
}

var privateProcProbe struct {
	once sync.Once
	err  error
}

// PrivateProcAvailable tells (probing once) whether runs can get a PID
// namespace with a /proc of their own here: a root server on a kernel whose
// procfs takes pidns=.
func PrivateProcAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("needs a root server")
	}
	privateProcProbe.once.Do(func() {
		done := make(chan error)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread is discarded
			done <- func() error {
				if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
					return fmt.Errorf("unshare mount namespace: %w", err)
				}
				if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
					return err
				}
				init, err := startPIDNamespace(nil, -1)
				if err != nil {
					return err
				}
				defer func() {
					_ = syscall.Kill(init, syscall.SIGKILL)
					var ws syscall.WaitStatus
					_, _ = syscall.Wait4(init, &ws, 0, nil)
				}()
				dir, err := os.MkdirTemp("", "pyexec-proc-probe-")
				if err != nil {
					return err
				}
				defer os.Remove(dir)
				nsfd, err := openPIDNamespace(init)
				if err != nil {
					return err
				}
				defer unix.Close(nsfd)
				if err := mountProc(dir, nsfd, true); err != nil {
					return err
				}
				return unix.Unmount(dir, unix.MNT_DETACH)
			}()
		}()
		privateProcProbe.err = <-done
	})
	return privateProcProbe.err
}

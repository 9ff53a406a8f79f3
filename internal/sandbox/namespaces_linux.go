package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// SupervisorDir is where, inside a warm interpreter's temp dir, its
// supervisors find its namespaces as the runs do not: proc/, a /proc of its
// PID namespace without hidepid (a run may make one of its processes
// non-dumpable, which hides it in /proc from everything but root, and its
// supervisor must still find it to end it), and mqueue/, the message queue
// filesystem of its IPC namespace (where a supervisor finds what a run left
// there). Runs cannot reach it: the temp dir is the warm interpreter's,
// 0700, and no run's Landlock layer grants it.
const SupervisorDir = ".supervisor"

// buildNamespaces gives the calling (locked starter) thread, and so the
// run forked from it, namespaces of its own. Root launcher only, before
// Landlock and seccomp (which forbid mounting and unsharing).
//
//   - mount: private propagation, a private /dev/shm, the reach binds and
//     the idmapped workspace (reach.go, idmap.go); the workspace, the tmp
//     dir and the read-write paths bound over themselves nosuid,nodev;
//     at the end every mount nosuid.
//   - IPC: its own SysV IPC and POSIX message queues (and /dev/mqueue).
//   - PID: its own namespace with a placeholder init and a /proc showing
//     only it (pidns.go); a warm interpreter also gets its supervisors'
//     view (SupervisorDir).
//
// A failure fails the run: these are the run's isolation, not options.
func (r *Run) buildNamespaces(a *syscall.ProcAttr) error {
	if err := enterPrivateShm(r.spec.Limits.MemoryBytes); err != nil {
		return fmt.Errorf("sandbox: private mount namespace: %w", err)
	}
	r.shmApplied = true
	r.applied = append(r.applied, "mount namespace with a private /dev/shm")
	if r.reach != nil {
		if err := r.reach.apply(); err != nil {
			return r.runAsFailed("mount namespace binds failed: " + err.Error())
		}
		r.applied = append(r.applied, r.reach.desc())
	}
	idmapped := false
	if r.idmapUserns >= 0 {
		if err := idmapOver(r.spec.Workspace, r.idmapUserns); err != nil {
			return r.runAsFailed("idmapped workspace: " + err.Error())
		}
		if r.spec.WorkspaceReadOnly {
			if err := remountReadOnly(r.spec.Workspace); err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
		}
		idmapped = true
		r.applied = append(r.applied, fmt.Sprintf("workspace idmapped: uid %d owns the server's files in it (created files are the server's on disk)", r.spec.RunAs.UID))
	}
	for _, p := range r.writable() {
		if p == r.spec.Workspace && idmapped {
			continue // the idmapped mount is nosuid,nodev already
		}
		if err := bindNoSetID(p); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	if err := enterPrivateIPC(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	r.applied = append(r.applied, "IPC namespace of its own (SysV shared memory, semaphores, message queues and POSIX message queues are the run's and die with it)")
	if r.pidNS && r.privateProc {
		// The init runs as root without capabilities (the bounding set is
		// empty already): no run-as uid can limit or renice it.
		init, err := startPIDNamespace(nil, r.cgroupFD(a))
		if err != nil {
			return fmt.Errorf("sandbox: pid namespace: %w", err)
		}
		nsfd, err := openPIDNamespace(init)
		if err != nil {
			return fmt.Errorf("sandbox: private /proc: %w", err)
		}
		defer unix.Close(nsfd)
		if err := mountProc("/proc", nsfd, true); err != nil {
			return fmt.Errorf("sandbox: private /proc: %w", err)
		}
		if r.supervisorView && r.spec.TmpDir != "" {
			if err := r.mountSupervisorView(nsfd); err != nil {
				return fmt.Errorf("sandbox: the supervisors' view: %w", err)
			}
		}
		r.procApplied = true
		// Go's ForkExec reads a parent outside the child's PID namespace
		// (getppid() == 0) as "already dead" and fires Pdeathsig at once.
		// Launcher death is still covered: its process group kill, the
		// run's cgroup and sandbox.Cleanup in the server.
		a.Sys.Pdeathsig = 0
		r.applied = append(r.applied, "pid namespace with a /proc of its own (hidepid=invisible): the run sees and reaches only its own processes; Python is pid 2 under a placeholder init")
	}
	if err := noSetIDAnywhere(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	r.applied = append(r.applied, "every mount nosuid; the workspace, tmp dir and /dev/shm also nodev")
	return nil
}

// mountSupervisorView mounts SupervisorDir's proc/ (the PID namespace
// nsfd, without hidepid) and mqueue/ (the IPC namespace this thread is in).
func (r *Run) mountSupervisorView(nsfd int) error {
	dir := filepath.Join(r.spec.TmpDir, SupervisorDir)
	for _, d := range []string{dir, filepath.Join(dir, "proc"), filepath.Join(dir, "mqueue")} {
		if err := os.Mkdir(d, 0o555); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	if err := mountProc(filepath.Join(dir, "proc"), nsfd, false); err != nil {
		return err
	}
	if err := unix.Mount("mqueue", filepath.Join(dir, "mqueue"), "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount mqueue: %w", err)
	}
	return nil
}

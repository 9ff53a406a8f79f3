package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Run is one confined run inside the launcher: Prepare, Start, (wait),
// Finish. It is not safe for concurrent use except Signal.
type Run struct {
	spec    Spec
	abi     int
	cg      *cgroup
	plan    *landlockPlan
	netDeny bool
	pidNS   bool
	asMem   bool
	nproc   bool
	dropCap bool
	// privateNS: give the run its own mount namespace (private /dev/shm,
	// nosuid,nodev mounts), IPC namespace and, with pidNS, PID namespace
	// and /proc: a root launcher only.
	privateNS bool
	// privateProc: the PID namespace gets a /proc of its own (privateNS,
	// and a kernel whose procfs takes pidns=).
	privateProc bool
	// reach: hidden ancestors of needed paths covered and the paths bound
	// back, in that mount namespace (see reach.go).
	reach *reachPlan
	// idmapUserns is the user namespace fd of the workspace idmapping
	// (-1: the workspace is mounted as is; see idmap.go).
	idmapUserns int
	idmapCh     chan idmapResult
	// supervisorView: the spec confines a warm interpreter, whose
	// supervisors get a view of its namespaces of their own (SupervisorDir).
	supervisorView bool
	applied        []string
	skipped        []string
	release        chan struct{}
	started        bool
	shmApplied     bool
	procApplied    bool
}

// Prepare checks the spec against what the kernel can do, creates the run's
// cgroup and private tmp ownership, and computes the Landlock ruleset. It
// fails closed (returning an error naming what is missing) unless
// spec.BestEffort, in which case what is skipped is recorded in the Report.
// Call Finish (or Close when Start was never called) to clean up.
func Prepare(spec Spec) (*Run, error) { return prepare(spec, nil) }

func prepare(spec Spec, ahead *Ahead) (*Run, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	r := &Run{spec: spec, release: make(chan struct{}), idmapUserns: -1}
	r.spec.Limits = spec.Limits.WithDefaults()
	confine := spec.Policy != PolicyNone
	root := os.Geteuid() == 0
	r.netDeny = spec.EffectiveNetwork() == NetworkDeny
	r.dropCap = confine
	var missing []string
	need := func(what string) {
		missing = append(missing, what)
	}

	if v, err := ll.LandlockGetABIVersion(); err == nil {
		r.abi = v
	}
	if confine {
		if r.abi < 1 {
			need("landlock (filesystem confinement): not available on this kernel")
		}
		if spec.Policy == PolicyStrict && r.abi < 6 {
			// Without scoping, a strict run could signal other runs of the
			// same uid; the PID namespace hides them, so this is soft.
			r.skipped = append(r.skipped, fmt.Sprintf("landlock signal scoping needs ABI 6 (have %d)", r.abi))
		}
	}
	r.supervisorView = confine && spec.ForkServer && root

	// Cgroup: memory cap, process cap, peak memory, kill-all.
	lim := r.spec.Limits
	if lim.MemoryBytes > 0 || lim.MaxProcs > 0 {
		cg, err := newCgroup(spec.RunID, lim)
		if err != nil {
			r.skipped = append(r.skipped, "cgroup: "+err.Error())
		} else {
			r.cg = cg
			r.applied = append(r.applied, fmt.Sprintf("cgroup %s (memory %d, pids %d)", cg.mode, lim.MemoryBytes, lim.MaxProcs))
		}
	}
	if confine && r.spec.RunAs != nil && root && needsIdmap(r.spec.RunAs, r.spec.Workspace) {
		// The idmapping's user namespace takes a short-lived process
		// (~1 ms): made while the cgroup and Landlock plan are prepared,
		// collected by Start. A launcher started ahead may have made it
		// already (ahead_linux.go).
		if r.idmapCh = ahead.idmapFor(r.spec.RunAs); r.idmapCh == nil {
			r.idmapCh = make(chan idmapResult, 1)
			go func(cred *Credential) {
				fd, err := usernsFD(cred)
				r.idmapCh <- idmapResult{fd, err}
			}(r.spec.RunAs)
		}
	}
	if confine && r.spec.RunAs != nil && root {
		plan, err := planReach(r.spec.RunAs, r.spec.readOnlyPaths(), r.writable())
		if err != nil {
			r.Close()
			return nil, r.runAsFailed("cannot plan the mount namespace binds: " + err.Error())
		}
		r.reach = plan
	}
	childUID := os.Geteuid()
	if r.spec.RunAs != nil {
		childUID = int(r.spec.RunAs.UID)
	}
	// RLIMIT_NPROC counts every process of the uid on the machine, so it is
	// only a fallback when there is no pids cgroup, and only for a dedicated
	// run-as uid: root ignores it, and on the launcher's own uid it would
	// count the user's other processes and could stop the Go runtime from
	// creating threads.
	r.nproc = r.cg == nil && lim.MaxProcs > 0 && childUID != 0 && childUID != os.Geteuid()
	if r.cg == nil {
		r.asMem = lim.MemoryBytes > 0
		if r.asMem {
			r.applied = append(r.applied, "memory via RLIMIT_AS (no cgroup)")
		}
		if lim.MaxProcs > 0 && !r.nproc {
			// Limits are not the policy: a missing mechanism is reported on
			// every result (and by doctor), but does not refuse the run. The
			// launcher's tree kill still ends a fork bomb at the timeout.
			r.skipped = append(r.skipped, "process limit: no pids cgroup, and RLIMIT_NPROC cannot stand in (root ignores it; on the server's own uid it counts all its processes): use --run-as or delegate a cgroup")
		}
	}
	if lim.CPUSeconds > 0 || lim.FileSizeBytes > 0 || lim.OpenFiles > 0 || r.nproc {
		r.applied = append(r.applied, fmt.Sprintf("rlimits (cpu %ds, fsize %d, nofile %d, nproc %v)", lim.CPUSeconds, lim.FileSizeBytes, lim.OpenFiles, r.nproc))
	}

	// Network: an empty namespace (entered at Start) is the only thing that
	// stops UDP and raw sockets; Landlock adds TCP rules where it can.
	if r.netDeny {
		r.applied = append(r.applied, "network namespace (no network, private loopback)")
	}
	// Strict also denies every TCP connect/bind with Landlock (defense in
	// depth, and no local servers either). "workspace + network deny" relies
	// on the namespace alone so a run can still talk to itself on loopback.
	denyTCP := spec.Policy == PolicyStrict && r.abi >= 4
	// A root launcher gives every confined run its own mount, IPC and PID
	// namespaces (and /proc); without root, strict still tries a PID
	// namespace (it fails without privileges, and says so).
	r.privateNS = confine && root
	r.privateProc = r.privateNS && spec.NoPrivateProc == ""
	r.pidNS = r.privateProc || spec.Policy == PolicyStrict
	if r.privateNS && !r.privateProc {
		// Without a /proc of its own a PID namespace would show the host's
		// processes under pids that mean others: not worth having, except
		// under strict (which reads none of /proc's per-process files).
		need("a PID namespace with its own /proc (every process outside the run unreachable): " + spec.NoPrivateProc)
	}
	if confine {
		plan, err := planLandlock(&r.spec, r.abi, denyTCP, r.privateNS, "")
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		if r.abi >= 1 {
			r.plan = plan
			r.applied = append(r.applied, plan.desc...)
			if plan.cfg.Scoped != 0 {
				r.applied = append(r.applied, "landlock scope: no signals/abstract sockets outside the run")
			}
		}
	}
	if r.spec.RunAs != nil {
		r.applied = append(r.applied, fmt.Sprintf("run as uid %d gid %d", r.spec.RunAs.UID, r.spec.RunAs.GID))
	} else if childUID == 0 && confine {
		r.applied = append(r.applied, "run as root with an empty capability bounding set")
	}
	if confine {
		r.applied = append(r.applied, "no_new_privs")
	}

	if spec.TmpDir != "" && confine && root {
		// The private tmp dir belongs to whoever the run executes as (a
		// root run has no CAP_DAC_OVERRIDE either). A non-root server made
		// it itself, so it already owns it.
		uid, gid := os.Geteuid(), os.Getegid()
		if r.spec.RunAs != nil {
			uid, gid = int(r.spec.RunAs.UID), int(r.spec.RunAs.GID)
		}
		if err := os.Chown(spec.TmpDir, uid, gid); err != nil {
			r.Close()
			return nil, fmt.Errorf("sandbox: make tmp dir writable by run-as user: %w", err)
		}
		if err := os.Chmod(spec.TmpDir, 0o700); err != nil {
			r.Close()
			return nil, fmt.Errorf("sandbox: tmp dir mode: %w", err)
		}
	}

	if len(missing) > 0 && !spec.BestEffort {
		r.Close()
		return nil, fmt.Errorf("sandbox: policy %s cannot be enforced on this kernel: %s (use --sandbox-best-effort to run anyway)", spec.Policy, strings.Join(missing, "; "))
	}
	r.skipped = append(r.skipped, missing...)
	return r, nil
}

// writable lists the paths the run may write: the workspace, its tmp dir
// and the extra read-write paths.
func (r *Run) writable() []string {
	var rw []string
	for _, d := range append([]string{r.spec.writableWorkspace(), r.spec.TmpDir}, r.spec.ReadWrite...) {
		if d != "" {
			rw = append(rw, d)
		}
	}
	return rw
}

// runAsFailed is the error of a run whose run-as user cannot be given what
// it needs. It never falls back to root: a root run (without capabilities)
// happens only when the operator asked for it with --run-as none.
func (r *Run) runAsFailed(why string) error {
	cred := r.spec.RunAs
	return fmt.Errorf("sandbox: cannot run as %s (uid %d): %s (make what the run needs reachable by uid %d, or pass --run-as none to run as root without capabilities)", cred.Name, cred.UID, why, cred.UID)
}

type idmapResult struct {
	fd  int
	err error
}

// collectIdmap waits for the idmapping's user namespace started by Prepare;
// without it, the run fails.
func (r *Run) collectIdmap() error {
	if r.idmapCh == nil {
		return nil
	}
	res := <-r.idmapCh
	r.idmapCh = nil
	if res.err != nil {
		return r.runAsFailed("the workspace is not writable by it and cannot be idmapped: " + res.err.Error())
	}
	r.idmapUserns = res.fd
	return nil
}

// Start starts the confined process like syscall.ForkExec(path, argv, attr)
// and returns its pid. attr.Sys may carry the launcher's own settings
// (Setpgid, Pdeathsig, Setsid...); Start adds Credential, Cloneflags and
// the cgroup. It is called once.
//
// The fork happens from a dedicated locked OS thread that, in this order,
// joins the run's v1 cgroups, drops its capability bounding set, enters
// the empty network namespace, builds the run's namespaces (namespaces.go:
// mount namespace with a private /dev/shm, the reach binds and the
// idmapped workspace, every writable path nosuid,nodev; IPC namespace; PID
// namespace with its init and /proc), sets no_new_privs and enforces
// Landlock, and installs the seccomp filter: all per-thread state the
// child inherits. (Namespaces and mounts need privileges Landlock and
// seccomp would take away, hence the order.) That thread stays parked
// until Finish/Close so that attr.Sys.Pdeathsig (which fires when the
// forking *thread* exits) keeps meaning "when the launcher dies". Rlimits
// are per process: they are set on the launcher itself right before the
// fork.
func (r *Run) Start(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	if r.started {
		return 0, errors.New("sandbox: Start called twice")
	}
	r.started = true
	a := *attr
	sys := &syscall.SysProcAttr{}
	if attr.Sys != nil {
		cp := *attr.Sys
		sys = &cp
	}
	a.Sys = sys
	if err := r.collectIdmap(); err != nil {
		return 0, err
	}
	if r.spec.RunAs != nil {
		sys.Credential = &syscall.Credential{Uid: r.spec.RunAs.UID, Gid: r.spec.RunAs.GID, Groups: []uint32{}}
	}
	if r.cg != nil && r.cg.mode == "v2" {
		sys.UseCgroupFD = true
		sys.CgroupFD = r.cg.fd
	}

	if err := applyRlimits(r.spec.Limits, r.nproc, false); err != nil {
		return 0, fmt.Errorf("sandbox: %w", err)
	}

	type result struct {
		pid int
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		pid, err := r.startOnThread(path, argv, &a)
		res <- result{pid, err}
		if err != nil {
			return
		}
		<-r.release
		// Return while locked: the runtime discards this thread.
	}()
	out := <-res
	if out.err != nil {
		return 0, out.err
	}
	if r.asMem {
		// RLIMIT_AS cannot be set on the launcher: the Go runtime dies when
		// its own mmap fails. Set it on Python right after exec instead;
		// ForkExec returns as soon as exec succeeded, and interpreter
		// startup takes milliseconds, so user code never runs uncapped.
		m := uint64(r.spec.Limits.MemoryBytes)
		if err := unix.Prlimit(out.pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: m, Max: m}, nil); err != nil && !errors.Is(err, unix.ESRCH) {
			_ = syscall.Kill(out.pid, syscall.SIGKILL)
			return 0, fmt.Errorf("sandbox: RLIMIT_AS on the run: %w", err)
		}
	}
	return out.pid, nil
}

func (r *Run) startOnThread(path string, argv []string, a *syscall.ProcAttr) (int, error) {
	var leave []*os.File
	if r.cg != nil && r.cg.mode == "v1" {
		// Open the way back before Landlock forbids writing to cgroupfs.
		for _, d := range []string{r.cg.origMemDir, r.cg.origPidsDir} {
			f, err := os.OpenFile(filepath.Join(d, "tasks"), os.O_WRONLY, 0)
			if err != nil {
				return 0, fmt.Errorf("sandbox: open parent cgroup: %w", err)
			}
			defer f.Close()
			leave = append(leave, f)
		}
		if err := r.cg.joinThread(); err != nil {
			return 0, fmt.Errorf("sandbox: join cgroup: %w", err)
		}
	}
	leaveCgroup := func() {
		for _, f := range leave {
			_, _ = f.Write([]byte("0")) // this thread (see joinThread)
		}
	}
	fail := func(err error) (int, error) {
		leaveCgroup()
		return 0, err
	}
	if r.dropCap {
		// First: the bounding set limits only what an exec grants, so this
		// thread keeps the capabilities its namespace work below needs,
		// while the PID namespace's init, forked meanwhile, gets none.
		if err := dropBoundingSet(); err != nil {
			return fail(fmt.Errorf("sandbox: %w", err))
		}
	}
	if r.netDeny {
		err := enterEmptyNetNS()
		if err != nil && os.Geteuid() != 0 && r.spec.RunAs == nil {
			// Unprivileged server: a user namespace lets the child own a new
			// network namespace. No uid map is written (Landlock, already
			// enforced on this thread, forbids writing /proc/PID/uid_map),
			// so inside, getuid() reports the overflow uid 65534, while the
			// kernel still checks files against the real uid. Loopback stays
			// down. Landlock applies as usual.
			a.Sys.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
			r.applied = append(r.applied, "user namespace (unprivileged server) holding the network namespace")
			err = nil
		}
		if err != nil {
			if !r.spec.BestEffort {
				return fail(fmt.Errorf("sandbox: network deny cannot be enforced: %w (use --sandbox-best-effort to run anyway)", err))
			}
			what := "the network is NOT blocked"
			if r.plan != nil && r.plan.cfg.HandledAccessNet != 0 {
				what = "only TCP is blocked (Landlock); UDP and raw sockets are not"
			}
			r.skipped = append(r.skipped, "network namespace: "+err.Error()+": "+what)
		}
	}
	if r.privateNS {
		if err := r.buildNamespaces(a); err != nil {
			return fail(err)
		}
	}
	if r.plan != nil {
		if err := r.plan.restrictThread(); err != nil {
			return fail(fmt.Errorf("sandbox: %w", err))
		}
	} else if r.spec.Policy != PolicyNone {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fail(fmt.Errorf("sandbox: no_new_privs: %w", err))
		}
	}
	if r.pidNS && !r.privateProc {
		// Without a private /proc to mount (no root, or an old kernel),
		// the namespace still ends every process with the run.
		if _, err := startPIDNamespace(a.Sys.Credential, r.cgroupFD(a)); err != nil {
			r.pidNS = false
			r.skipped = append(r.skipped, "pid namespace: "+err.Error())
		} else {
			a.Sys.Pdeathsig = 0 // see buildNamespaces
		}
	}
	if r.spec.Policy != PolicyNone {
		// Last, so the filter does not apply to our own setup syscalls
		// (unshare for the PID namespace) — only to Python and its children.
		if err := installSeccomp(a.Sys.Cloneflags&syscall.CLONE_NEWUSER != 0, a.Sys.UseCgroupFD); err != nil {
			r.skipped = append(r.skipped, "seccomp: "+err.Error())
		} else {
			r.applied = append(r.applied, "seccomp filter (namespaces, bpf, io_uring, keyring, perf, modules, mounts; no set-user-ID or set-group-ID files, no device nodes)")
		}
	}
	pid, err := syscall.ForkExec(path, argv, a)
	leaveCgroup()
	if err != nil {
		return 0, fmt.Errorf("sandbox: start %s: %w", path, err)
	}
	if r.pidNS && !r.privateProc {
		r.applied = append(r.applied, "pid namespace (Python is pid 2 under a placeholder init; every process dies with the run)")
	}
	return pid, nil
}

// cgroupFD is the v2 cgroup fd a child of the starter thread is cloned
// into, or -1.
func (r *Run) cgroupFD(a *syscall.ProcAttr) int {
	if a.Sys.UseCgroupFD {
		return a.Sys.CgroupFD
	}
	return -1
}

// dropBoundingSet empties the calling thread's capability bounding set, so a
// child running as uid 0 gets no capabilities at execve.
func dropBoundingSet() error {
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break // past CAP_LAST_CAP
		}
		if err != nil && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
		if errors.Is(err, unix.EPERM) && os.Geteuid() == 0 {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}

// Started reports what is in force once Start returned: the mechanisms
// applied and skipped so far, and whether /dev/shm and /proc are private.
// The launcher sends it with its "started" event; a warm interpreter's runs
// inherit exactly this confinement.
func (r *Run) Started() Report {
	return Report{
		Applied: slices.Clone(r.applied), Skipped: slices.Clone(r.skipped), MemoryViaRlimit: r.asMem,
		PrivateShm: r.shmApplied, PrivateProc: r.procApplied,
	}
}

// Signal sends sig to every process in the run's cgroup (including ones
// that called setsid or were reparented away). No-op without a cgroup; the
// launcher's own process-tree kill still applies.
func (r *Run) Signal(sig syscall.Signal) {
	if r.cg == nil {
		return
	}
	if sig == syscall.SIGKILL {
		r.cg.killAll()
		return
	}
	r.cg.signal(sig)
}

// Finish is called after the launcher reaped the Python process (ws is its
// wait status, cpuSeconds the user+system CPU of the run's processes, 0 if
// unknown). It reads the cgroup's evidence, kills whatever is left in the
// cgroup, removes it, and says which limit (if any) was exceeded.
func (r *Run) Finish(ws syscall.WaitStatus, cpuSeconds float64) Report {
	rep := r.Conclude(ws, cpuSeconds)
	if err := r.Close(); err != nil {
		rep.CleanupError = err.Error()
	}
	return rep
}

// Conclude is Finish without the removal of the cgroup: every process of
// the run is killed and the evidence read, so the result can be reported
// at once; Close then removes the cgroup, off the result's path (the
// launcher reports first). Nothing of the run is left running after
// Conclude; what Close may fail to remove is an empty directory, which
// Cleanup removes later.
func (r *Run) Conclude(ws syscall.WaitStatus, cpuSeconds float64) Report {
	rep := r.Started()
	var st cgroupStats
	if r.cg != nil {
		r.cg.killAll()
		st = r.cg.stats()
		rep.PeakMemoryBytes = st.PeakMemoryBytes
		rep.PeakProcs = st.PeakPids
	}
	rep.LimitExceeded = classify(ws, cpuSeconds, st, r.spec.Limits)
	return rep
}

// classify derives the exceeded limit from evidence, most specific first.
func classify(ws syscall.WaitStatus, cpuSeconds float64, st cgroupStats, lim Limits) string {
	switch {
	case st.OOMKills > 0:
		return LimitMemory
	case ws.Signaled() && ws.Signal() == syscall.SIGXCPU:
		return LimitCPU
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL && lim.CPUSeconds > 0 &&
		cpuSeconds >= float64(lim.CPUSeconds):
		return LimitCPU
	case ws.Signaled() && ws.Signal() == syscall.SIGXFSZ:
		return LimitFileSize
	case st.PidsMaxHits > 0:
		return LimitProcesses
	}
	return ""
}

// Close releases the starter thread and removes the cgroup (killing what is
// left in it). Safe to call more than once.
func (r *Run) Close() error {
	select {
	case <-r.release:
	default:
		close(r.release)
	}
	if r.idmapCh != nil {
		if res := <-r.idmapCh; res.err == nil {
			unix.Close(res.fd)
		}
		r.idmapCh = nil
	}
	if r.idmapUserns >= 0 {
		unix.Close(r.idmapUserns)
		r.idmapUserns = -1
	}
	if r.cg == nil {
		return nil
	}
	r.cg.killAll()
	err := r.cg.remove()
	r.cg = nil
	return err
}

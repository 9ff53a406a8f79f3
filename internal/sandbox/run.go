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

// Limit names reported in Report.LimitExceeded.
const (
	LimitMemory    = "memory"
	LimitCPU       = "cpu"
	LimitProcesses = "processes"
	LimitFileSize  = "file_size"
)

// Report is what the sandbox tells about a finished run. The launcher puts
// it in its status; the engine copies LimitExceeded, PeakMemoryBytes and
// Notes into the Result.
type Report struct {
	// LimitExceeded names the limit the run hit ("memory", "cpu",
	// "processes", "file_size"), derived from evidence (cgroup OOM kills,
	// pids.max rejections, SIGXCPU, SIGXFSZ). Empty when none.
	LimitExceeded string `json:"limit_exceeded,omitempty"`
	// PeakMemoryBytes is the cgroup's peak memory (all processes), 0 when
	// there was no cgroup.
	PeakMemoryBytes int64 `json:"peak_memory_bytes,omitempty"`
	PeakProcs       int64 `json:"peak_procs,omitempty"`
	// Applied lists the mechanisms in force for the run.
	Applied []string `json:"applied,omitempty"`
	// Skipped lists what the policy wanted but this kernel could not do
	// (only ever non-empty with BestEffort, or for optional mechanisms).
	Skipped []string `json:"skipped,omitempty"`
	// MemoryViaRlimit is true when memory was capped with RLIMIT_AS
	// (no cgroup): then a MemoryError in stderr means the cap was hit.
	MemoryViaRlimit bool `json:"memory_via_rlimit,omitempty"`
	// CleanupError is set when the run's cgroup could not be removed.
	CleanupError string `json:"cleanup_error,omitempty"`
	// PrivateShm is true when the run got its own /dev/shm (a tmpfs in its
	// mount namespace).
	PrivateShm bool `json:"private_shm,omitempty"`
	// RunAsDropped is true when the spec named a run-as user but the run
	// fell back to root without capabilities (see Skipped for why).
	RunAsDropped bool `json:"run_as_dropped,omitempty"`
}

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
	// privateShm: give the run its own /dev/shm in a mount namespace.
	privateShm bool
	// reach: hidden ancestors of needed paths covered and the paths bound
	// back, in that mount namespace (see reach.go).
	reach *reachPlan
	// idmapUserns is the user namespace fd of the workspace idmapping
	// (-1: the workspace is mounted as is; see idmap.go).
	idmapUserns int
	idmapCh     chan idmapResult
	applied     []string
	skipped     []string
	release     chan struct{}
	started     bool
	shmApplied  bool
	runAsDrop   bool
}

// Prepare checks the spec against what the kernel can do, creates the run's
// cgroup and private tmp ownership, and computes the Landlock ruleset. It
// fails closed (returning an error naming what is missing) unless
// spec.BestEffort, in which case what is skipped is recorded in the Report.
// Call Finish (or Close when Start was never called) to clean up.
func Prepare(spec Spec) (*Run, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	r := &Run{spec: spec, release: make(chan struct{}), idmapUserns: -1}
	r.spec.Limits = spec.Limits.WithDefaults()
	confine := spec.Policy != PolicyNone
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
	if confine && r.spec.RunAs != nil && os.Geteuid() == 0 && needsIdmap(r.spec.RunAs, r.spec.Workspace) {
		// The idmapping's user namespace takes a short-lived process
		// (~1 ms): made while the cgroup and Landlock plan are prepared,
		// collected by Start.
		r.idmapCh = make(chan idmapResult, 1)
		go func(cred *Credential) {
			fd, err := usernsFD(cred)
			r.idmapCh <- idmapResult{fd, err}
		}(r.spec.RunAs)
	}
	if confine && r.spec.RunAs != nil && os.Geteuid() == 0 {
		var rw []string
		for _, d := range append([]string{r.spec.writableWorkspace(), r.spec.TmpDir}, r.spec.ReadWrite...) {
			if d != "" {
				rw = append(rw, d)
			}
		}
		plan, err := planReach(r.spec.RunAs, r.spec.readOnlyPaths(), rw)
		if err != nil {
			if ferr := r.runAsRoot("cannot plan the mount namespace binds: " + err.Error()); ferr != nil {
				r.Close()
				return nil, ferr
			}
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
	if spec.Policy == PolicyStrict {
		r.pidNS = true // tried at Start; falls back with a note if refused
	}
	// A private /dev/shm needs CAP_SYS_ADMIN; without it, strict gets no
	// /dev/shm and workspace the shared one.
	r.privateShm = confine && os.Geteuid() == 0
	if confine {
		plan, err := planLandlock(&r.spec, r.abi, denyTCP, r.privateShm, "")
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

	if spec.TmpDir != "" && confine && os.Geteuid() == 0 {
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

// runAsRoot falls back from the run-as user to root without capabilities
// (today's behaviour when nobody cannot reach what the run needs), with a
// note saying why, unless the policy demands the run-as user: then it
// returns the error to fail closed.
func (r *Run) runAsRoot(why string) error {
	cred := r.spec.RunAs
	if cred == nil {
		return nil
	}
	if r.spec.RunAsRequired {
		return fmt.Errorf("sandbox: run-as %s (uid %d) required but: %s", cred.Name, cred.UID, why)
	}
	r.spec.RunAs = nil
	r.runAsDrop = true
	r.reach = nil
	if r.idmapUserns >= 0 {
		unix.Close(r.idmapUserns)
		r.idmapUserns = -1
	}
	r.skipped = append(r.skipped, fmt.Sprintf("run as uid %d: ran as root without capabilities instead: %s", cred.UID, why))
	if r.plan != nil {
		// The plan may have left out what only the run-as user could not
		// read (the shadow files): plan again for root.
		plan, err := planLandlock(&r.spec, r.abi, r.plan.cfg.HandledAccessNet != 0, r.privateShm, "")
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		r.plan = plan
	}
	return nil
}

type idmapResult struct {
	fd  int
	err error
}

// collectIdmap waits for the idmapping's user namespace started by Prepare;
// without it, the run falls back to root (or fails when run-as is required).
func (r *Run) collectIdmap() error {
	if r.idmapCh == nil {
		return nil
	}
	res := <-r.idmapCh
	r.idmapCh = nil
	if res.err == nil && r.spec.RunAs != nil {
		r.idmapUserns = res.fd
		return nil
	}
	if res.err == nil {
		unix.Close(res.fd)
		return nil
	}
	if err := r.runAsRoot("workspace not writable and no idmapping: " + res.err.Error()); err != nil {
		return err
	}
	if err := chownTmp(r.spec.TmpDir, os.Geteuid(), os.Getegid()); err != nil {
		return fmt.Errorf("sandbox: give the tmp dir back to root: %w", err)
	}
	for i, s := range r.applied {
		if strings.HasPrefix(s, "run as uid ") {
			r.applied[i] = "run as root with an empty capability bounding set"
		}
	}
	return nil
}

// Start starts the confined process like syscall.ForkExec(path, argv, attr)
// and returns its pid. attr.Sys may carry the launcher's own settings
// (Setpgid, Pdeathsig, Setsid...); Start adds Credential, Cloneflags and
// the cgroup. It is called once.
//
// The fork happens from a dedicated locked OS thread that, in this order,
// joins the run's v1 cgroups, enters the empty network namespace, enters a
// mount namespace with a private /dev/shm (where, for a run-as uid, needed
// paths below unsearchable dirs such as /root are bound back into a tmpfs
// skeleton and a server-owned workspace is idmapped: reach.go, idmap.go),
// drops its capability bounding
// set, sets no_new_privs and enforces Landlock, starts the PID namespace's
// placeholder init, and installs the seccomp filter: all per-thread state
// the child inherits. (Namespaces and mounts need privileges Landlock and
// seccomp would take away, hence the order.) That thread stays parked until
// Finish/Close so that attr.Sys.Pdeathsig (which fires when the forking
// *thread* exits) keeps meaning "when the launcher dies". Rlimits are per
// process: they are set on the launcher itself right before the fork.
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
				leaveCgroup()
				return 0, fmt.Errorf("sandbox: network deny cannot be enforced: %w (use --sandbox-best-effort to run anyway)", err)
			}
			what := "the network is NOT blocked"
			if r.plan != nil && r.plan.cfg.HandledAccessNet != 0 {
				what = "only TCP is blocked (Landlock); UDP and raw sockets are not"
			}
			r.skipped = append(r.skipped, "network namespace: "+err.Error()+": "+what)
		}
	}
	var shmErr error
	if r.privateShm {
		if shmErr = enterPrivateShm(r.spec.Limits.MemoryBytes); shmErr != nil {
			// Optional: strict then simply has no /dev/shm (see planLandlock).
			r.skipped = append(r.skipped, "private /dev/shm: "+shmErr.Error())
		} else {
			r.shmApplied = true
			r.applied = append(r.applied, "mount namespace with a private /dev/shm")
		}
	}
	if r.reach != nil || r.idmapUserns >= 0 {
		// Still in this thread's fresh mount namespace, before the
		// capability drop, Landlock and seccomp take mounting away.
		err := shmErr
		switch {
		case !r.privateShm:
			err = errors.New("no private mount namespace")
		case err == nil && r.reach != nil:
			err = r.reach.apply()
			if err == nil {
				r.applied = append(r.applied, r.reach.desc())
			}
		}
		if err == nil && r.idmapUserns >= 0 {
			if err = idmapOver(r.spec.Workspace, r.idmapUserns); err == nil && r.spec.WorkspaceReadOnly {
				err = remountReadOnly(r.spec.Workspace)
			}
			if err == nil {
				r.applied = append(r.applied, fmt.Sprintf("workspace idmapped: uid %d owns the server's files in it (created files are the server's on disk)", r.spec.RunAs.UID))
			}
		}
		if err != nil {
			// The plan undid its mounts: root (the owner) still reaches
			// everything the run needs.
			if ferr := r.runAsRoot("mount namespace binds failed: " + err.Error()); ferr != nil {
				leaveCgroup()
				return 0, ferr
			}
			if err := chownTmp(r.spec.TmpDir, os.Geteuid(), os.Getegid()); err != nil {
				leaveCgroup()
				return 0, fmt.Errorf("sandbox: give the tmp dir back to root: %w", err)
			}
			a.Sys.Credential = nil
			for i, s := range r.applied {
				if strings.HasPrefix(s, "run as uid ") {
					r.applied[i] = "run as root with an empty capability bounding set"
				}
			}
		}
	}
	if r.dropCap {
		if err := dropBoundingSet(); err != nil {
			leaveCgroup()
			return 0, fmt.Errorf("sandbox: %w", err)
		}
	}
	if r.plan != nil {
		if err := r.plan.restrictThread(); err != nil {
			leaveCgroup()
			return 0, fmt.Errorf("sandbox: %w", err)
		}
	} else if r.spec.Policy != PolicyNone {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			leaveCgroup()
			return 0, fmt.Errorf("sandbox: no_new_privs: %w", err)
		}
	}
	if r.pidNS {
		if err := r.startPIDNamespace(a); err != nil {
			// PID namespaces are optional: run without, and say so.
			r.pidNS = false
			r.skipped = append(r.skipped, "pid namespace: "+err.Error())
		} else {
			// Go's ForkExec reads a parent outside the child's PID namespace
			// (getppid() == 0) as "already dead" and fires Pdeathsig at
			// once. Launcher death is still covered: its process group kill,
			// the run's cgroup and sandbox.Cleanup in the server.
			a.Sys.Pdeathsig = 0
		}
	}
	if r.spec.Policy != PolicyNone {
		// Last, so the filter does not apply to our own setup syscalls
		// (unshare for the PID namespace) — only to Python and its children.
		if err := installSeccomp(a.Sys.Cloneflags&syscall.CLONE_NEWUSER != 0, a.Sys.UseCgroupFD); err != nil {
			r.skipped = append(r.skipped, "seccomp: "+err.Error())
		} else {
			r.applied = append(r.applied, "seccomp deny-list (namespaces, bpf, io_uring, keyring, perf, modules, mounts)")
		}
	}
	pid, err := syscall.ForkExec(path, argv, a)
	leaveCgroup()
	if err != nil {
		return 0, fmt.Errorf("sandbox: start %s: %w", path, err)
	}
	if r.pidNS {
		r.applied = append(r.applied, "pid namespace (Python is pid 2 under a placeholder init; every process dies with the run)")
	}
	return pid, nil
}

// startPIDNamespace makes the calling (locked starter) thread's next
// children land in a new PID namespace and starts its init: a confined
// `sleep infinity` with the run's identity. Python is then forked as pid 2,
// so it keeps ordinary signal semantics (as pid 1 the kernel would drop
// SIGTERM from the launcher and any default-action signal it sends itself).
// Orphans of the run are reparented to this init (a subreaper outside the
// namespace cannot adopt them); they stay zombies until the run ends, counted
// by the pids cgroup. Killing the init, which the launcher does with every
// other descendant, makes the kernel kill whatever is left in the namespace.
func (r *Run) startPIDNamespace(a *syscall.ProcAttr) error {
	sleep := ""
	for _, p := range []string{"/bin/sleep", "/usr/bin/sleep"} {
		if _, err := os.Stat(p); err == nil {
			sleep = p
			break
		}
	}
	if sleep == "" {
		return errors.New("no sleep binary for the namespace's init")
	}
	if err := unix.Unshare(unix.CLONE_NEWPID); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	initAttr := &syscall.ProcAttr{Dir: "/", Env: []string{}, Sys: &syscall.SysProcAttr{
		Credential: a.Sys.Credential, UseCgroupFD: a.Sys.UseCgroupFD, CgroupFD: a.Sys.CgroupFD,
	}}
	if _, err := syscall.ForkExec(sleep, []string{"sleep", "infinity"}, initAttr); err != nil {
		// The thread's children would still go to the (init-less) new
		// namespace and fail; this thread is unusable for the run.
		return fmt.Errorf("start init: %w", err)
	}
	return nil
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
// applied and skipped so far, whether /dev/shm is private and whether the
// run-as user was dropped. The launcher sends it with its "started" event;
// a warm interpreter's runs inherit exactly this confinement.
func (r *Run) Started() Report {
	return Report{
		Applied: slices.Clone(r.applied), Skipped: slices.Clone(r.skipped), MemoryViaRlimit: r.asMem,
		PrivateShm: r.shmApplied, RunAsDropped: r.runAsDrop,
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
// unknown). It reads the cgroup's
// evidence, kills whatever is left in the cgroup, removes it, and says
// which limit (if any) was exceeded.
func (r *Run) Finish(ws syscall.WaitStatus, cpuSeconds float64) Report {
	rep := Report{Applied: r.applied, Skipped: r.skipped, MemoryViaRlimit: r.asMem, PrivateShm: r.shmApplied, RunAsDropped: r.runAsDrop}
	var st cgroupStats
	if r.cg != nil {
		r.cg.killAll()
		st = r.cg.stats()
		rep.PeakMemoryBytes = st.PeakMemoryBytes
		rep.PeakProcs = st.PeakPids
	}
	rep.LimitExceeded = classify(ws, cpuSeconds, st, r.spec.Limits)
	if err := r.Close(); err != nil {
		rep.CleanupError = err.Error()
	}
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

// LimitFromStderr refines the report with evidence only the output shows:
// CPython ignores SIGXFSZ (it gets EFBIG instead), a RLIMIT_AS cap surfaces
// as MemoryError, and RLIMIT_NPROC as EAGAIN from fork. Pass the tail of
// the run's stderr. It returns rep.LimitExceeded when that is already set.
func LimitFromStderr(rep Report, stderrTail string, exitCode int) string {
	if rep.LimitExceeded != "" || exitCode == 0 {
		return rep.LimitExceeded
	}
	switch {
	case strings.Contains(stderrTail, "[Errno 27] File too large"):
		return LimitFileSize
	case rep.MemoryViaRlimit && strings.Contains(stderrTail, "MemoryError"):
		return LimitMemory
	case strings.Contains(stderrTail, "BlockingIOError: [Errno 11] Resource temporarily unavailable"):
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

// Notes is a one-line summary for results: the policy and what was skipped.
func (rep Report) Notes() string {
	if len(rep.Skipped) == 0 {
		return ""
	}
	return "not enforced on this machine: " + strings.Join(rep.Skipped, "; ")
}

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Warm runs.
//
// A warm interpreter (a fork server) is started through the launcher like a
// run of its own, under a zygote spec: the runs' settings and identity, with
// read and write grants wide enough for every run it will fork (Covers
// checks that). Everything confinement does once per process tree is then
// inherited by each fork exactly as a cold run would get it from the
// launcher: the run-as user, the mount namespace (tmpfs skeleton, binds,
// idmapped workspace, private /dev/shm, nosuid mounts), the network, IPC and
// PID namespaces with the warm interpreter's /proc, the empty capability
// bounding set, no_new_privs, the seccomp filter and the rlimits. What a cold run gets per run, a warm run gets from WarmRun: the
// server gives the run its cgroup (made ahead, see warm_cgroup_linux.go)
// and its Landlock ruleset (the same plan a cold run's launcher computes,
// its system part kept between runs, see landlock_cache_linux.go) and
// hands the fork open descriptors; the
// fork joins the cgroup by writing "0" to them (the kernel checks the
// opener's credentials, so an unprivileged fork can) and stacks the ruleset
// as a second Landlock layer with landlock_restrict_self before the run's
// first instruction. The intersection of the zygote's layer and the run's
// is the run's, since the zygote's grants are a superset.

// Warm prepares warm runs for one server: it keeps what does not change
// between runs (where cgroups are created) so that a run pays only for what
// is its own.
//
// A Warm must be closed (Close) once its server takes no more runs: it
// holds spare cgroups and open descriptors.
type Warm struct {
	// SpareTag names this server's spare cgroups
	// ("pyexec-spare-TAG-PIDNS-PID-N"), so that servers sharing a parent
	// cgroup (and their leftover checks) tell theirs apart. Spares a server
	// killed before its Close left are removed by the next server that
	// makes cgroups there (sweepSpares).
	SpareTag string

	once   sync.Once
	loc    cgroupLoc
	locErr error
	stock  cgroupStock
	system systemParts // the system part of the runs' Landlock rulesets
}

type cgroupLoc struct{ mode, mem, pids string }

func (h *Warm) location() (cgroupLoc, error) {
	h.once.Do(func() {
		h.loc.mode, h.loc.mem, h.loc.pids, h.locErr = cgroupLocation()
		if h.locErr == nil {
			sweepSpares(h.loc)
		}
	})
	return h.loc, h.locErr
}

// WarmRun is the per-run half of the confinement of a run forked from a warm
// interpreter. Prepare it before handing the request over, give the fork
// Files, and call Finish once the run's tree is gone.
type WarmRun struct {
	spec    Spec
	zygote  Report
	cg      *warmCgroup
	ruleset *os.File // Landlock ruleset the fork restricts itself with
	flags   uint32
	applied []string
}

// Prepare gives the run its cgroup (memory and process caps, peak
// memory, kill-all: a spare made ahead with the run's limits, or one made
// now) and its Landlock ruleset, and gives its tmp dir to the
// run-as user. zygote is the warm interpreter's own started report: its
// mechanisms are the run's too; zygotePID is its pid, through which the
// ruleset reaches what its mount namespace mounts privately (/dev/shm). An
// error means the run cannot be confined warm (it should start cold, which
// reports the reason as usual). A longLived run's (a session's) cgroup is
// named for it (pyexec-RUNID) even when it was made ahead; an ordinary
// run's may keep a spare's name.
func (h *Warm) Prepare(spec Spec, zygote Report, zygotePID int, longLived bool) (*WarmRun, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	w := &WarmRun{spec: spec, zygote: zygote}
	w.spec.Limits = spec.Limits.WithDefaults()
	lim := w.spec.Limits
	confine := spec.Policy != PolicyNone
	if (lim.MemoryBytes > 0 || lim.MaxProcs > 0) && !zygote.MemoryViaRlimit && !zygoteSkippedCgroup(zygote) {
		loc, err := h.location()
		if err != nil {
			return nil, fmt.Errorf("sandbox: cgroup: %w", err)
		}
		name := ""
		if longLived {
			name = spec.RunID
		}
		cg := h.stock.take(loc, h.SpareTag, lim, name)
		if cg == nil {
			cg, err = newWarmCgroup(loc, spec.RunID, lim)
		}
		if err != nil {
			return nil, fmt.Errorf("sandbox: cgroup: %w", err)
		}
		w.cg = cg
		w.applied = append(w.applied, fmt.Sprintf("cgroup %s (memory %d, pids %d)", cg.cg.mode, lim.MemoryBytes, lim.MaxProcs))
	}
	if confine {
		abi, err := ll.LandlockGetABIVersion()
		if err != nil || abi < 1 {
			if !spec.BestEffort {
				w.Close()
				return nil, errors.New("sandbox: landlock not available")
			}
		} else {
			nsRoot := ""
			if zygote.PrivateShm || zygote.PrivateProc {
				nsRoot = fmt.Sprintf("/proc/%d/root", zygotePID)
			}
			fd, flags, desc, err := h.system.ruleset(&w.spec, abi, spec.Policy == PolicyStrict && abi >= 4, zygote.PrivateShm, nsRoot)
			if err != nil {
				w.Close()
				return nil, fmt.Errorf("sandbox: %w", err)
			}
			if fd >= 0 {
				w.ruleset, w.flags = os.NewFile(uintptr(fd), "landlock-ruleset"), flags
				w.applied = append(w.applied, "landlock layer of the run: "+strings.Join(desc, "; "))
			}
		}
		if spec.TmpDir != "" && os.Geteuid() == 0 {
			uid, gid := os.Geteuid(), os.Getegid()
			if spec.RunAs != nil {
				uid, gid = int(spec.RunAs.UID), int(spec.RunAs.GID)
			}
			if err := errors.Join(os.Chown(spec.TmpDir, uid, gid), os.Chmod(spec.TmpDir, 0o700)); err != nil {
				w.Close()
				return nil, fmt.Errorf("sandbox: make tmp dir writable by run-as user: %w", err)
			}
		}
	}
	return w, nil
}

// zygoteSkippedCgroup reports whether the warm interpreter found no usable
// cgroup: then its runs cannot have one either (their limits come from the
// rlimits they inherit, as a cold run's would).
func zygoteSkippedCgroup(z Report) bool {
	for _, s := range z.Skipped {
		if strings.HasPrefix(s, "cgroup: ") {
			return true
		}
	}
	return false
}

// CgroupFiles are the files the fork writes "0" to, joining the run's
// cgroup before anything else (none without a cgroup).
func (w *WarmRun) CgroupFiles() []*os.File {
	if w.cg == nil {
		return nil
	}
	return w.cg.join
}

// Ruleset is the run's Landlock ruleset and its landlock_restrict_self
// flags (nil when there is no Landlock layer to add).
func (w *WarmRun) Ruleset() (*os.File, uint32) { return w.ruleset, w.flags }

// CPUSeconds is the run's RLIMIT_CPU, which the fork sets itself (the warm
// interpreter runs without one, so its own CPU time never counts).
func (w *WarmRun) CPUSeconds() int64 {
	if w.spec.Limits.CPUSeconds > 0 {
		return w.spec.Limits.CPUSeconds
	}
	return 0
}

// ReleaseFiles closes the server's copies of the descriptors once the fork
// holds its own.
func (w *WarmRun) ReleaseFiles() {
	if w.cg != nil {
		w.cg.releaseJoin()
	}
	if w.ruleset != nil {
		w.ruleset.Close()
		w.ruleset = nil
	}
}

// Finish reads the cgroup's evidence once the run's tree is gone and reports
// like a cold run's launcher does: the zygote's mechanisms plus the run's
// own, and the limit exceeded. Close (which may run later, off the run's
// path) sweeps and removes the cgroup.
func (w *WarmRun) Finish(exitCode, signal int, cpuSeconds float64) Report {
	rep := Report{
		Applied: append(slices.Clone(w.zygote.Applied), w.applied...), Skipped: slices.Clone(w.zygote.Skipped),
		MemoryViaRlimit: w.zygote.MemoryViaRlimit, PrivateShm: w.zygote.PrivateShm, PrivateProc: w.zygote.PrivateProc,
	}
	var st cgroupStats
	if w.cg != nil {
		st = w.cg.stats()
		rep.PeakMemoryBytes = st.PeakMemoryBytes
		rep.PeakProcs = st.PeakPids
	}
	ws := syscall.WaitStatus((exitCode & 0xff) << 8)
	if signal > 0 {
		ws = syscall.WaitStatus(signal & 0x7f)
	}
	rep.LimitExceeded = classify(ws, cpuSeconds, st, w.spec.Limits)
	return rep
}

// Close releases the descriptors and removes the cgroup (killing what is
// left in it). Safe to call more than once.
func (w *WarmRun) Close() error {
	w.ReleaseFiles()
	if w.cg == nil {
		return nil
	}
	err := w.cg.close()
	w.cg = nil
	return err
}

// Ahead makes spare cgroups for runs with limits lim in the background (a
// warm interpreter was started for such runs), so that the first of them
// finds one too.
func (h *Warm) Ahead(lim Limits) {
	lim = lim.WithDefaults()
	if lim.MemoryBytes <= 0 && lim.MaxProcs <= 0 {
		return
	}
	loc, err := h.location()
	if err != nil {
		return
	}
	h.stock.mu.Lock()
	defer h.stock.mu.Unlock()
	if !h.stock.closed {
		h.stock.refillLocked(loc, h.SpareTag, stockKey{lim.MemoryBytes, lim.MaxProcs}, lim)
	}
}

// Spares lists the directories of the spare cgroups made ahead and not
// handed out yet (none once closed).
func (h *Warm) Spares() []string { return h.stock.names() }

// Close removes the spare cgroups and closes what was kept of the
// Landlock rulesets. Runs prepared after it get cgroups of
// their own, made for them, as without spares.
func (h *Warm) Close() error {
	h.system.close()
	return h.stock.close()
}

// Covers reports whether a warm interpreter confined by zygote can fork runs
// confined by run: same settings, identity, workspace and hidden trees, and
// every path the run may read or write granted to the zygote (its grants are
// the outer Landlock layer, and under a run-as user, what its mount namespace
// binds). When it returns false it says which path is missing.
func Covers(zygote, run *Spec) (bool, string) {
	z, r := zygote.Settings, run.Settings
	z.Limits, r.Limits = z.Limits.WithDefaults(), r.Limits.WithDefaults()
	z.Limits.CPUSeconds, r.Limits.CPUSeconds = 0, 0 // set per run by the fork
	if z.Policy == "" {
		z.Policy = DefaultPolicy
	}
	if r.Policy == "" {
		r.Policy = DefaultPolicy
	}
	switch {
	case z.Policy != r.Policy || z.EffectiveNetwork() != r.EffectiveNetwork() || z.Limits != r.Limits || z.BestEffort != r.BestEffort:
		return false, "sandbox settings"
	case !sameCred(zygote.RunAs, run.RunAs):
		return false, "run-as"
	case zygote.Workspace != run.Workspace || !slices.Equal(zygote.Hidden, run.Hidden):
		return false, "workspace"
	}
	// The workspace grant does not cover a hidden tree inside it (a state
	// dir in the workspace): what a run needs there must be granted by
	// name, since the zygote's mount namespace shows only what it binds.
	explicitRW := append([]string{zygote.TmpDir}, zygote.ReadWrite...)
	covered := func(p string, writable bool) bool {
		grants := explicitRW
		if !writable {
			grants = append(slices.Clone(zygote.ReadOnly), explicitRW...)
		}
		if withinAny(p, grants) {
			return true
		}
		return withinAny(p, []string{zygote.Workspace}) && !withinAny(p, zygote.Hidden)
	}
	for _, p := range append([]string{run.TmpDir}, run.ReadWrite...) {
		if p != "" && !covered(p, true) {
			return false, p
		}
	}
	for _, p := range run.ReadOnly {
		if !covered(p, false) {
			return false, p
		}
	}
	return true, ""
}

func sameCred(a, b *Credential) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID && a.GID == b.GID
}

// withinAny reports whether p is one of dirs or below one of them.
func withinAny(p string, dirs []string) bool {
	p = filepath.Clean(p)
	for _, d := range dirs {
		if d != "" && (p == filepath.Clean(d) || under(p, filepath.Clean(d))) {
			return true
		}
	}
	return false
}

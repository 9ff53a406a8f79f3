package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// landlockConfigs indexes go-landlock's presets by ABI version so the
// ruleset handles exactly what this kernel can enforce (no silent
// best-effort downgrade inside go-landlock: we decide what is missing).
var landlockConfigs = []landlock.Config{
	{}, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
	landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
}

func landlockPreset(abi int) landlock.Config {
	if abi >= len(landlockConfigs) {
		abi = len(landlockConfigs) - 1
	}
	return landlockConfigs[abi]
}

// Devices every run may write (and read): the harmless character devices.
var rwDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}

// roDevicesStrict are the devices a strict run may read besides rwDevices.
var roDevicesStrict = []string{"/dev/urandom", "/dev/random"}

// strictSystemRO is what CPython and common wheels need to start and work
// under strict: binaries, shared libraries, the stdlib, certificates,
// time zones, user/group lookup, CPU count.
var strictSystemRO = []string{
	"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/passwd", "/etc/group",
	"/etc/nsswitch.conf", "/etc/hosts", "/etc/mime.types", "/etc/python3", "/etc/python3.11",
	"/etc/fonts", "/etc/timezone",
	"/sys/devices/system/cpu",
	// Harmless machine facts some libraries read (BLAS, psutil-like code);
	// per-process /proc entries stay out of reach.
	"/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg",
}

// alwaysHidden are trees a workspace-policy run may not read: /tmp holds
// other programs' and runs' temp files. Spec.Hidden adds more (the engine
// hides its state dir: other runs' code, temp dirs and logs).
// The shadow files matter when a run falls back to root without
// capabilities: as their owner it could still read them.
var alwaysHidden = []string{"/tmp", "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"}

// readableExcept lists the paths to grant so that everything under root is
// readable except the hidden trees. Landlock grants by subtree and cannot
// carve a hole out of a grant, so the grant is split along the path to each
// hidden tree: every sibling on the way is granted, the ancestors themselves
// are not (Landlock does not restrict path lookup through them, only opening
// them). Only directories on a path to a hidden tree are listed.
func readableExcept(root string, hidden []string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", root, err)
	}
	var out []string
	for _, e := range ents {
		p := filepath.Join(root, e.Name())
		covered, above := false, false
		for _, h := range hidden {
			if p == h {
				covered = true
			} else if strings.HasPrefix(h, p+"/") {
				above = true
			}
		}
		switch {
		case covered:
		case above && e.IsDir():
			sub, err := readableExcept(p, hidden)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		default:
			out = append(out, p)
		}
	}
	return out, nil
}

// landlockPlan is the ruleset for one run, computed before anything is
// applied so errors surface early and tests can inspect it.
type landlockPlan struct {
	cfg   landlock.Config
	rules []landlock.Rule
	desc  []string
}

// planLandlock builds the ruleset for the spec on a kernel with the given ABI.
// denyTCP adds Landlock's TCP bind/connect denial (strict).
// privateShm says /dev/shm will be the run's own tmpfs (then strict may use
// it too). nsRoot, when set, is how the planner reaches the root of the
// run's mount namespace (/proc/PID/root of a process in it): rules on what
// that namespace mounts over the host's view (/dev/shm, /proc, /dev/mqueue)
// must name its inodes, since Landlock does not look at a mount point
// hidden by a mount. (The launcher opens the rule paths inside the run's
// namespace itself and passes no nsRoot.)
func planLandlock(s *Spec, abi int, denyTCP, privateShm bool, nsRoot string) (*landlockPlan, error) {
	sys, _, err := systemReadOnly(s)
	if err != nil {
		return nil, err
	}
	runRO, rw, err := runGrants(s, privateShm)
	if err != nil {
		return nil, err
	}
	ro := append(sys, runRO...)
	if nsRoot != "" {
		for _, list := range [][]string{ro, rw} {
			for i, p := range list {
				if nsMounted(p) {
					list[i] = nsRoot + p
				}
			}
		}
	}
	p := &landlockPlan{cfg: landlockConfig(abi, denyTCP)}
	p.rules = landlockRules(abi, ro, rw)
	p.desc = landlockDesc(abi, rw, len(ro), denyTCP)
	return p, nil
}

// landlockConfig is the ruleset's handled access on a kernel with the
// given ABI (denyTCP: TCP bind/connect too).
func landlockConfig(abi int, denyTCP bool) landlock.Config {
	pre := landlockPreset(abi)
	c := landlock.Config{HandledAccessFS: pre.HandledAccessFS, Scoped: pre.Scoped}
	if denyTCP {
		c.HandledAccessNet = pre.HandledAccessNet
	}
	return c
}

func landlockDesc(abi int, rw []string, nro int, denyTCP bool) []string {
	desc := []string{fmt.Sprintf("landlock abi %d: rw %v; ro %d paths", abi, rw, nro)}
	if denyTCP {
		desc = append(desc, "landlock: all TCP connect/bind denied")
	}
	return desc
}

// systemReadOnly is what a run may read of the system: for strict, the
// system paths CPython needs; otherwise everything but the hidden trees
// (alwaysHidden and s.Hidden). It depends on the policy, the hidden trees
// and the run-as user only (and on the filesystem), never on the run's
// own paths. checked lists the hidden candidates whose permissions decided
// whether they are hidden.
func systemReadOnly(s *Spec) (ro, checked []string, err error) {
	if s.Policy == PolicyStrict {
		return append(slices.Clone(strictSystemRO), roDevicesStrict...), nil, nil
	}
	hidden, checked := hiddenTrees(s)
	ro, err = readableExcept("/", hidden)
	return ro, checked, err
}

// hiddenTrees are the trees a workspace-policy run may not read, resolved.
func hiddenTrees(s *Spec) (hidden, checked []string) {
	for _, h := range append(append([]string{}, alwaysHidden...), s.Hidden...) {
		if h != "/tmp" && slices.Contains(alwaysHidden, h) && s.RunAs != nil && s.RunAs.UID != 0 {
			checked = append(checked, h)
			if CheckAccess(s.RunAs, h, AccessRead) != nil {
				// A shadow file the run-as user cannot read anyway: hiding it
				// would split the grant of /etc into a rule per entry
				// (156 rules instead of 24 here), for nothing.
				continue
			}
		}
		if real, err := filepath.EvalSymlinks(h); err == nil {
			h = real
		}
		hidden = append(hidden, filepath.Clean(h))
	}
	return hidden, checked
}

// runGrants are the run's own paths: what it may read besides the system
// (its interpreter, code, read-only workspace) and what it may write.
func runGrants(s *Spec, privateShm bool) (ro, rw []string, err error) {
	ro = slices.Clone(s.readOnlyPaths())
	for _, d := range append([]string{s.writableWorkspace(), s.TmpDir}, s.ReadWrite...) {
		if d != "" {
			rw = append(rw, d)
		}
	}
	if s.Policy != PolicyStrict || privateShm {
		// POSIX semaphores (multiprocessing locks) live in /dev/shm. When
		// it is the host's, shared with other runs, strict leaves it out.
		rw = append(rw, "/dev/shm")
	}
	// Landlock opens rule paths itself; a missing optional system path is
	// fine, but a missing workspace/tmp/read-only path is a spec error.
	for _, d := range append(append([]string{s.Workspace, s.TmpDir}, s.ReadOnly...), s.ReadWrite...) {
		if d == "" {
			continue
		}
		if _, err := os.Stat(d); err != nil {
			return nil, nil, fmt.Errorf("sandbox path: %w", err)
		}
	}
	return ro, rw, nil
}

// landlockRules are the rules granting ro and rw (missing paths ignored).
func landlockRules(abi int, ro, rw []string) []landlock.Rule {
	var rules []landlock.Rule
	// Split: directories get directory rights, files get file rights.
	roDirs, roFiles := splitDirs(ro)
	rwDirs, rwFiles := splitDirs(rw)
	if len(roDirs) > 0 {
		rules = append(rules, landlock.RODirs(roDirs...).IgnoreIfMissing())
	}
	if len(roFiles) > 0 {
		rules = append(rules, landlock.ROFiles(roFiles...).IgnoreIfMissing())
	}
	if len(rwDirs) > 0 {
		// Refer lets the run rename/link between its own writable dirs
		// (os.rename across directories, shutil.move) instead of EXDEV.
		r := landlock.RWDirs(rwDirs...).IgnoreIfMissing()
		if abi >= 2 {
			r = r.WithRefer()
		}
		rules = append(rules, r)
	}
	rwFiles = append(rwFiles, rwDevices...)
	rules = append(rules, landlock.RWFiles(rwFiles...).IgnoreIfMissing())
	return rules
}

// nsMounted reports whether p is on a filesystem a run's mount namespace
// mounts afresh (its /proc, /dev/shm and /dev/mqueue).
func nsMounted(p string) bool {
	for _, m := range []string{"/proc", "/dev/shm", "/dev/mqueue"} {
		if p == m || strings.HasPrefix(p, m+"/") {
			return true
		}
	}
	return false
}

func splitDirs(paths []string) (dirs, files []string) {
	seen := map[string]bool{}
	for _, p := range paths {
		p = filepath.Clean(p)
		if seen[p] {
			continue
		}
		seen[p] = true
		st, err := os.Stat(p)
		if err != nil {
			// Missing optional path: keep it as a dir rule, IgnoreIfMissing
			// drops it.
			dirs = append(dirs, p)
			continue
		}
		if st.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
	}
	return dirs, files
}

// restrictThread enforces the plan on the calling locked OS thread only
// (no TSYNC): the launcher's other threads stay free, and the child forked
// from this thread inherits the Landlock domain. no_new_privs is a
// precondition of landlock_restrict_self and is per-thread too.
func (p *landlockPlan) restrictThread() error {
	fd, flags, err := p.cfg.NewRulesetFD(p.rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return nil
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock restrict: %w", err)
	}
	return nil
}

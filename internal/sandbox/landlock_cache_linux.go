package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/pathwalk"
)

// The system part of a warm run's Landlock ruleset, kept between runs.
//
// Most of a run's ruleset is the system it may read (systemReadOnly: the
// listing of / split around the hidden trees, or strict's list of system
// paths), which is the same for every run of a server: working it out (a
// directory listing, a stat per path, the permission checks of the shadow
// files) and opening each path for its rule was half a millisecond of a
// warm run's preparation. A warm server keeps it, and the paths' O_PATH
// descriptors, and only adds the rules to each run's new ruleset.
//
// It is kept only while nothing it was made from changed. Which inode a
// path names, and what a directory lists, change only by changing an entry
// of a directory looked up on the way (a rename, a new or removed entry),
// and whether a shadow file is hidden changes only with its mode or owner:
// each of these changes the ctime of that directory or file, which nobody
// can set back. So every run first stats them (the real directories met
// resolving every path, and the shadow files) and rebuilds all of it when
// one is not as it was. What was made when one of them had just changed
// (its ctime is not older than the building by a margin wider than the
// kernel's timestamp granularity) is used for that run and not kept, so a
// change made while it was built cannot go unseen.
//
// A descriptor is kept only for a path whose every directory met resolving
// it is owned by root and writable by nobody else, and it is used only for
// a run that may not write any of them (not in its workspace, temp dir,
// read-write paths or /dev/shm): nothing a run, or another user, could
// swap. Every other path of the system part (and what the run's mount
// namespace mounts afresh, /proc and /dev/shm) is opened by name for each
// run, as are all of the run's own paths (its code, temp dir, cwd,
// interpreter, everything writable).

// landlockRacyMargin is how recent a change may be for a system part not
// to be kept: ctimes are coarse (a scheduler tick, 4 ms at 250 Hz).
const landlockRacyMargin = 100 * time.Millisecond

// systemKey is what the system part depends on besides the filesystem.
type systemKey struct {
	policy Policy
	hidden string // s.Hidden, NUL-joined
	runAs  bool
	uid    uint32
	gid    uint32 // a shadow file's group may read it: CheckAccess looks at both
}

func systemKeyOf(s *Spec) systemKey {
	k := systemKey{policy: s.Policy, hidden: strings.Join(s.Hidden, "\x00")}
	if s.RunAs != nil {
		k.runAs, k.uid, k.gid = true, s.RunAs.UID, s.RunAs.GID
	}
	if k.policy == "" {
		k.policy = DefaultPolicy
	}
	return k
}

// systemGrant is one path of the system part.
type systemGrant struct {
	path string   // as systemReadOnly lists it
	dir  bool     // a directory (directory rights) or a file
	fd   int      // O_PATH descriptor kept, or -1: opened by name per run
	deps []string // real directories met resolving path
}

// fileCheck is the state of a directory or file the system part was made
// from.
type fileCheck struct {
	path     string
	exists   bool
	dev, ino uint64
	ctime    unix.Timespec
}

func checkFile(path string) fileCheck {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return fileCheck{path: path}
	}
	return fileCheck{path: path, exists: true, dev: st.Dev, ino: st.Ino, ctime: st.Ctim}
}

// systemPart is a system part kept between runs.
type systemPart struct {
	n      int // len(systemReadOnly): the report counts it
	grants []systemGrant
	checks []fileCheck
	keep   bool                 // nothing it depends on had just changed when it was made
	dirs   map[[2]uint64]string // the checks and the grants (real paths), by device and inode
}

// current reports whether nothing p was made from changed since.
func (p *systemPart) current() bool {
	for _, c := range p.checks {
		if checkFile(c.path) != c {
			return false
		}
	}
	return true
}

func (p *systemPart) close() {
	for i := range p.grants {
		if p.grants[i].fd >= 0 {
			unix.Close(p.grants[i].fd)
			p.grants[i].fd = -1
		}
	}
}

// buildSystemPart works out s's system part and opens what may be kept.
// start is when it began (the racy margin is counted from it).
func buildSystemPart(s *Spec, start time.Time) (*systemPart, error) {
	ro, checked, err := systemReadOnly(s)
	if err != nil {
		return nil, err
	}
	p := &systemPart{n: len(ro)}
	deps := map[string]bool{}
	var files []string // checked besides directories
	addDeps := func(path string) (real string, ds []string) {
		real, links, err := pathwalk.Resolve(path)
		if err != nil {
			// Missing (optional): it must stay missing. Its directories
			// are what would change if it appeared.
			files = append(files, path)
			for d := filepath.Dir(filepath.Clean(path)); ; d = filepath.Dir(d) {
				ds = append(ds, d)
				if d == "/" {
					break
				}
			}
			return "", ds
		}
		for _, l := range links {
			ds = append(ds, ancestors(filepath.Dir(l.Path))...)
		}
		ds = append(ds, ancestors(filepath.Dir(real))...)
		return real, ds
	}
	if s.Policy != PolicyStrict {
		// The listing of / splits along the path to every hidden tree but
		// one inside another (the state dir in /tmp): it stops at the outer.
		hidden, _ := hiddenTrees(s)
		for _, h := range append(slices.Clone(alwaysHidden), s.Hidden...) {
			real, ds := addDeps(h)
			if real != "" && slices.ContainsFunc(hidden, func(o string) bool { return o != real && inTree(real, o) }) {
				continue
			}
			for _, d := range ds {
				deps[d] = true
			}
		}
	}
	for _, h := range checked {
		files = append(files, h) // its mode and owner decided whether it is hidden
	}
	seen := map[string]bool{}
	ids := map[[2]uint64]string{} // the grants' and the checks' inodes
	for _, path := range ro {
		path = filepath.Clean(path)
		if seen[path] {
			continue
		}
		seen[path] = true
		real, ds := addDeps(path)
		for _, d := range ds {
			deps[d] = true
		}
		if real == "" {
			continue // no rule, as IgnoreIfMissing would drop it
		}
		g := systemGrant{path: path, fd: -1, deps: slices.Compact(slices.Sorted(slices.Values(append(ds, real))))}
		var st unix.Stat_t
		if unix.Stat(real, &st) != nil {
			continue
		}
		g.dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
		ids[[2]uint64{st.Dev, st.Ino}] = real
		if !nsMounted(path) && rootOnly(ds) {
			if fd, err := unix.Open(real, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0); err == nil {
				g.fd = fd
			}
		}
		p.grants = append(p.grants, g)
	}
	for d := range deps {
		p.checks = append(p.checks, checkFile(d))
	}
	for _, f := range files {
		p.checks = append(p.checks, checkFile(f))
	}
	slices.SortFunc(p.checks, func(a, b fileCheck) int { return strings.Compare(a.path, b.path) })
	for _, c := range p.checks {
		if c.exists {
			ids[[2]uint64{c.dev, c.ino}] = c.path
		}
	}
	p.dirs = ids
	p.keep = true
	margin := start.Add(-landlockRacyMargin)
	for _, c := range p.checks {
		if c.exists && !time.Unix(c.ctime.Unix()).Before(margin) {
			p.keep = false
		}
	}
	return p, nil
}

// inTree reports whether the clean path p is dir or below it.
func inTree(p, dir string) bool {
	if dir == "/" || p == dir {
		return true
	}
	return len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// ancestors lists dir and every directory above it.
func ancestors(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == "/" {
			return out
		}
	}
}

// rootOnly reports whether only root can change an entry of the dirs.
func rootOnly(dirs []string) bool {
	for _, d := range dirs {
		var st unix.Stat_t
		if unix.Lstat(d, &st) != nil || st.Uid != 0 || st.Mode&0o022 != 0 {
			return false
		}
	}
	return true
}

// systemParts keeps one server's system parts, by systemKey.
type systemParts struct {
	mu    sync.Mutex
	parts map[systemKey]*systemPart
	now   func() time.Time // time.Now; tests move it on to keep what they just made
}

// systemPartsKept bounds how many system parts (each a few dozen
// descriptors) a server keeps.
const systemPartsKept = 4

// ruleset makes s's Landlock ruleset for a warm run: the run's own paths
// (runRO, rw) by name, the system part from what was kept when it is
// current. It returns the ruleset (-1: nothing to restrict), its
// landlock_restrict_self flags and the report's description.
func (k *systemParts) ruleset(s *Spec, abi int, denyTCP, privateShm bool, nsRoot string) (int, uint32, []string, error) {
	runRO, rw, err := runGrants(s, privateShm)
	if err != nil {
		return -1, 0, nil, err
	}
	key := systemKeyOf(s)
	k.mu.Lock()
	defer k.mu.Unlock()
	part := k.parts[key]
	if part != nil && !part.current() {
		part.close()
		delete(k.parts, key)
		part = nil
	}
	if part == nil {
		now := time.Now
		if k.now != nil {
			now = k.now
		}
		if part, err = buildSystemPart(s, now()); err != nil {
			return -1, 0, nil, err
		}
		if part.keep {
			if k.parts == nil {
				k.parts = map[systemKey]*systemPart{}
			}
			for old, p := range k.parts {
				if len(k.parts) < systemPartsKept {
					break
				}
				p.close()
				delete(k.parts, old)
			}
			k.parts[key] = part
		} else {
			defer part.close()
		}
	}
	kept, byName := part.split(rw)
	byName = append(byName, runRO...)
	rwNamed := slices.Clone(rw)
	if nsRoot != "" {
		for _, list := range [][]string{byName, rwNamed} {
			for i, p := range list {
				if nsMounted(p) {
					list[i] = nsRoot + p
				}
			}
		}
	}
	cfg := landlockConfig(abi, denyTCP)
	fd, flags, err := cfg.NewRulesetFD(landlockRules(abi, byName, rwNamed)...)
	if err != nil {
		return -1, 0, nil, fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return -1, 0, nil, nil
	}
	for _, g := range kept {
		access := roFileAccess
		if g.dir {
			access = roDirAccess
		}
		attr := ll.PathBeneathAttr{ParentFd: g.fd, AllowedAccess: uint64(access & cfg.HandledAccessFS)}
		if attr.AllowedAccess == 0 {
			continue
		}
		if err := ll.LandlockAddPathBeneathRule(fd, &attr, 0); err != nil {
			unix.Close(fd)
			return -1, 0, nil, fmt.Errorf("landlock_add_rule %s: %w", g.path, err)
		}
	}
	return fd, flags, landlockDesc(abi, rwNamed, part.n+len(runRO), denyTCP), nil
}

// split tells the grants whose kept descriptor a run writing rw may use
// from those it must open by name: not kept open, or met on the way to
// them is a directory it may write.
func (part *systemPart) split(rw []string) (kept []*systemGrant, byName []string) {
	// What the run may write, as named and where it is: a directory the
	// system part was made from (or a grant) that is one of them, the same
	// inode, so that a symlink or a bind mount hides nothing. Every
	// directory above a grant's deps is one of its checks, so this finds
	// any writable directory at or above them.
	var writableDirs []string
	for _, d := range rw {
		writableDirs = append(writableDirs, filepath.Clean(d))
		var st unix.Stat_t
		if unix.Stat(d, &st) == nil {
			if real, ok := part.dirs[[2]uint64{st.Dev, st.Ino}]; ok {
				writableDirs = append(writableDirs, real)
			}
		}
	}
	writable := func(g *systemGrant) bool {
		for _, d := range g.deps {
			for _, w := range writableDirs {
				if inTree(d, w) {
					return true
				}
			}
		}
		return false
	}
	for i := range part.grants {
		g := &part.grants[i]
		if g.fd >= 0 && !writable(g) {
			kept = append(kept, g)
		} else {
			byName = append(byName, g.path)
		}
	}
	return kept, byName
}

// The rights landlock.RODirs and landlock.ROFiles grant (go-landlock does
// not export them; a test checks they are the same).
const (
	roDirAccess  = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	roFileAccess = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSReadFile)
)

func (k *systemParts) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, p := range k.parts {
		p.close()
		delete(k.parts, key)
	}
}

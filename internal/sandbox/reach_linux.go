package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/pathwalk"
)

// Reach: making what a run needs reachable by its unprivileged uid, and
// nothing else, the way bubblewrap does.
//
// On these machines root's home is 0700 and holds pyenv's interpreters and
// the default state dir (code files, per-run tmp dirs, uv environments), so
// nobody cannot even traverse to them. Inside the run's private mount
// namespace (the one that already gives it a private /dev/shm), each
// highest ancestor the run uid cannot search (e.g. /root) is covered by a
// small read-only tmpfs holding only the directory chain (0755) down to each
// needed path, and every needed path is bind-mounted back at its real path:
// read-only for interpreter prefixes, environments, the code file and the
// jobs helper; read-write for the tmp dir and the workspace. Symlink names
// on the way (e.g. a pyenv alias) are recreated in the tmpfs. Everything
// else under /root (keys, tokens, other projects, jobs.db, other runs'
// tmp dirs) does not exist for the run.
//
// Order on the starter thread: unshare(CLONE_NEWNS) + private propagation
// (enterPrivateShm), then applyReach (fds are opened after the unshare:
// bind mount sources must belong to the caller's mount namespace), then the
// capability drop, Landlock (which forbids mount changes afterwards, and
// whose rule fds, opened after the binds, land on the same inodes since a
// bind mount shows the very same inode) and seccomp (which denies mount).

// reachFailForTest makes apply fail after covering the tops (tests only).
var reachFailForTest bool

// reachBind is a needed path (symlinks resolved) bound back into a tmpfs.
type reachBind struct {
	Path string
	Dir  bool
	RW   bool
}

// reachPlan is computed in Prepare (as root, outside the namespace) and
// applied on the starter thread.
type reachPlan struct {
	Tops  []string
	Binds []reachBind
	Links []pathwalk.Link
}

// hiddenAncestor returns the highest proper ancestor of the absolute path p
// that cred cannot search, or "" when every ancestor is searchable.
func hiddenAncestor(cred *Credential, p string) string {
	dir := "/"
	for _, part := range strings.Split(strings.TrimPrefix(filepath.Dir(p), "/"), "/") {
		if part == "" {
			continue
		}
		dir = filepath.Join(dir, part)
		if modeAllows(cred, dir, AccessExec) != nil {
			return dir
		}
	}
	return ""
}

// under reports whether p is below dir (strictly).
func under(p, dir string) bool {
	return dir == "/" && p != "/" || strings.HasPrefix(p, dir+"/")
}

// planReach computes what to hide and bind so cred reaches ro (read-only)
// and rw (read-write) paths. It returns nil when nothing is hidden from
// cred. Missing paths are skipped (Landlock ignores them too).
func planReach(cred *Credential, ro, rw []string) (*reachPlan, error) {
	if cred == nil || cred.UID == 0 {
		return nil, nil
	}
	tops := map[string]bool{}
	var binds []reachBind
	var links []pathwalk.Link
	add := func(p string, writable bool) error {
		if p == "" {
			return nil
		}
		real, ls, err := pathwalk.Resolve(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		st, err := os.Stat(real)
		if err != nil {
			return err
		}
		if t := hiddenAncestor(cred, real); t != "" {
			tops[t] = true
			binds = append(binds, reachBind{Path: real, Dir: st.IsDir(), RW: writable})
		}
		for _, l := range ls {
			if t := hiddenAncestor(cred, l.Path); t != "" {
				tops[t] = true
				links = append(links, l)
			}
		}
		return nil
	}
	for _, p := range ro {
		if err := add(p, false); err != nil {
			return nil, err
		}
	}
	for _, p := range rw {
		if err := add(p, true); err != nil {
			return nil, err
		}
	}
	if len(tops) == 0 {
		return nil, nil
	}
	plan := &reachPlan{}
	for t := range tops {
		plan.Tops = append(plan.Tops, t)
	}
	sort.Strings(plan.Tops)
	// Parents before children; a path under another bind with the same
	// mode comes with it. A writable path wins over a read-only duplicate.
	sort.SliceStable(binds, func(i, j int) bool {
		if len(binds[i].Path) != len(binds[j].Path) {
			return len(binds[i].Path) < len(binds[j].Path)
		}
		return binds[i].RW && !binds[j].RW
	})
	for _, b := range binds {
		for _, t := range plan.Tops {
			if b.Path == t || under(t, b.Path) {
				return nil, fmt.Errorf("needed path %s is itself not searchable by uid %d", b.Path, cred.UID)
			}
		}
		dup := false
		for _, o := range plan.Binds {
			if o.Path == b.Path || under(b.Path, o.Path) && o.RW == b.RW {
				dup = true
				break
			}
		}
		if !dup {
			plan.Binds = append(plan.Binds, b)
		}
	}
	seen := map[string]bool{}
	for _, l := range links {
		inBind := false
		for _, b := range plan.Binds {
			if l.Path == b.Path || under(l.Path, b.Path) {
				inBind = true
			}
		}
		if !inBind && !seen[l.Path] {
			seen[l.Path] = true
			plan.Links = append(plan.Links, l)
		}
	}
	return plan, nil
}

// inBind reports whether p lies inside (or is) one of the first n binds.
func (p *reachPlan) inBind(path string, n int) bool {
	for _, b := range p.Binds[:n] {
		if path == b.Path || under(path, b.Path) {
			return true
		}
	}
	return false
}

// mkdirChain creates the directories from top down to dir in the tmpfs
// (0755 regardless of umask). It never creates anything inside a bind.
func mkdirChain(top, dir string) error {
	if dir == top {
		return nil
	}
	if err := mkdirChain(top, filepath.Dir(dir)); err != nil {
		return err
	}
	if err := unix.Mkdir(dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	return unix.Chmod(dir, 0o755)
}

func (p *reachPlan) topOf(path string) string {
	for _, t := range p.Tops {
		if under(path, t) {
			return t
		}
	}
	return ""
}

// apply performs the plan on the calling locked thread, which must already
// be in its own mount namespace with private propagation. On failure it
// detaches what it mounted, so the namespace looks as before.
func (p *reachPlan) apply() error {
	mounted, err := p.mount()
	if err != nil {
		for i := len(mounted) - 1; i >= 0; i-- {
			_ = unix.Unmount(mounted[i], unix.MNT_DETACH)
		}
	}
	return err
}

func (p *reachPlan) mount() (mounted []string, err error) {
	// Sources first: after a tmpfs covers a top they are out of reach.
	fds := make([]int, len(p.Binds))
	for i := range fds {
		fds[i] = -1
	}
	defer func() {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	for i, b := range p.Binds {
		fd, err := unix.Open(b.Path, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return mounted, fmt.Errorf("open %s: %w", b.Path, err)
		}
		fds[i] = fd
	}
	for _, t := range p.Tops {
		if err := unix.Mount("tmpfs", t, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=1m,nr_inodes=4096"); err != nil {
			return mounted, fmt.Errorf("mount tmpfs on %s: %w", t, err)
		}
		mounted = append(mounted, t)
	}
	if reachFailForTest {
		return mounted, errors.New("injected failure (test)")
	}
	for i, b := range p.Binds {
		if !p.inBind(b.Path, i) {
			top := p.topOf(b.Path)
			if top == "" {
				return mounted, fmt.Errorf("%s: no covering tmpfs", b.Path)
			}
			if err := mkdirChain(top, filepath.Dir(b.Path)); err != nil {
				return mounted, err
			}
			if b.Dir {
				if err := mkdirChain(top, b.Path); err != nil {
					return mounted, err
				}
			} else if fd, err := unix.Open(b.Path, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644); err != nil {
				return mounted, fmt.Errorf("create mount point %s: %w", b.Path, err)
			} else {
				unix.Close(fd)
			}
		}
		src := "/proc/self/fd/" + strconv.Itoa(fds[i])
		if err := unix.Mount(src, b.Path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return mounted, fmt.Errorf("bind %s: %w", b.Path, err)
		}
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if !b.RW {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, b.Path, unix.AT_RECURSIVE, attr); err != nil {
			return mounted, fmt.Errorf("restrict bind %s: %w", b.Path, err)
		}
	}
	for _, l := range p.Links {
		top := p.topOf(l.Path)
		if top == "" || p.inBind(l.Path, len(p.Binds)) {
			continue
		}
		if err := mkdirChain(top, filepath.Dir(l.Path)); err != nil {
			return mounted, err
		}
		if err := unix.Symlink(l.Target, l.Path); err != nil && !errors.Is(err, unix.EEXIST) {
			return mounted, fmt.Errorf("symlink %s: %w", l.Path, err)
		}
	}
	for _, t := range p.Tops {
		// The skeleton itself is read-only (the binds keep their own mode).
		if err := unix.MountSetattr(unix.AT_FDCWD, t, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return mounted, fmt.Errorf("make tmpfs on %s read-only: %w", t, err)
		}
	}
	return mounted, nil
}

// Paths lists what the plan binds, for notes.
func (p *reachPlan) desc() string {
	var b []string
	for _, x := range p.Binds {
		mode := "ro"
		if x.RW {
			mode = "rw"
		}
		b = append(b, x.Path+" ("+mode+")")
	}
	return fmt.Sprintf("private mount namespace: %s hidden behind a tmpfs; bound back: %s",
		strings.Join(p.Tops, ", "), strings.Join(b, ", "))
}

var reachProbe struct {
	once sync.Once
	ok   bool
}

// ReachAvailable tells whether runs can get a private mount namespace in
// which hidden paths they need are bound back (needs a root server). The
// probe runs once: unshare a mount namespace on a throwaway thread.
func ReachAvailable() bool {
	if os.Geteuid() != 0 {
		return false
	}
	reachProbe.once.Do(func() {
		done := make(chan bool)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread is discarded
			done <- unix.Unshare(unix.CLONE_NEWNS) == nil
		}()
		reachProbe.ok = <-done
	})
	return reachProbe.ok
}

// resolveAll resolves the symlinks of each path, dropping those that do not
// exist.
func resolveAll(paths []string) []string {
	var out []string
	for _, r := range paths {
		if rr, err := filepath.EvalSymlinks(r); err == nil {
			out = append(out, rr)
		}
	}
	return out
}

// checkBoundAccess is CheckAccess for a run whose needed paths are bound
// back below hidden ancestors: an ancestor of path that cred cannot search
// is tolerated when it lies strictly above a root containing path (the
// tmpfs skeleton replaces it with a 0755 directory). realRoots are those
// paths resolved once (resolveAll), since many paths are checked against
// the same roots.
func checkBoundAccess(cred *Credential, path string, want uint32, realRoots []string) error {
	if cred == nil || cred.UID == 0 {
		return nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	real, _ = filepath.Abs(real)
	replaced := func(dir string) bool {
		for _, r := range realRoots {
			if (real == r || under(real, r)) && under(r, dir) {
				return true
			}
		}
		return false
	}
	dir := "/"
	for _, part := range strings.Split(strings.TrimPrefix(filepath.Dir(real), "/"), "/") {
		if part == "" {
			continue
		}
		dir = filepath.Join(dir, part)
		if replaced(dir) {
			continue
		}
		if err := modeAllows(cred, dir, AccessExec); err != nil {
			return err
		}
	}
	return modeAllows(cred, real, want)
}

// hiddenTops lists the hidden ancestors of paths for cred (for notes).
func hiddenTops(cred *Credential, paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if t := hiddenAncestor(cred, real); t != "" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// chownTmp gives the run's tmp dir to uid:gid (fallback to root).
func chownTmp(dir string, uid, gid int) error {
	if dir == "" {
		return nil
	}
	return syscall.Chown(dir, uid, gid)
}

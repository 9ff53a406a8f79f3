package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// view is how the run sees a file's owner and group: an idmapped
// workspace shows the server's files as the run's own, and the run user's
// own files on disk as nobody's.
func (w Rights) view(uid, gid uint32) (uint32, uint32) {
	const unmapped = ^uint32(0)
	if w.Idmapped {
		switch uid {
		case w.ServerUID:
			uid = w.UID
		case w.UID:
			uid = unmapped
		}
		switch gid {
		case w.ServerGID:
			gid = w.GID
		case w.GID:
			gid = unmapped
		}
	}
	return uid, gid
}

// allows tells whether the run could access a file with owner uid, group
// gid and mode, wanting want (permRead, permWrite, permExec).
func (w Rights) allows(st *unix.Stat_t, want uint32) bool {
	if w.Server {
		return true
	}
	uid, gid := w.view(st.Uid, st.Gid)
	perm := st.Mode & 0o7
	switch {
	case uid == w.UID:
		perm = (st.Mode >> 6) & 0o7
	case gid == w.GID:
		perm = (st.Mode >> 3) & 0o7
	}
	return perm&want == want
}

// mayReplace tells whether the run could unlink or rename over file in
// dir (already known writable): a sticky directory lets only the file's or
// the directory's owner do it.
func (w Rights) mayReplace(dir, file *unix.Stat_t) bool {
	if w.Server || dir.Mode&unix.S_ISVTX == 0 {
		return true
	}
	fileUID, _ := w.view(file.Uid, file.Gid)
	dirUID, _ := w.view(dir.Uid, dir.Gid)
	return fileUID == w.UID || dirUID == w.UID
}

// newOwner is who a file the server creates for the run must belong to,
// so that the run can change it later: nothing to do when runs execute as
// the server or see the server's files as their own (idmapped).
func (w Rights) newOwner() (uid, gid int, chown bool) {
	if w.Server || w.Idmapped || int(w.UID) == os.Geteuid() {
		return 0, 0, false
	}
	return int(w.UID), int(w.GID), true
}

// resolveNoLinks is how every component is opened: never through a
// symlink, never above the directory it is opened from.
const resolveNoLinks = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// OpenBeneath opens dir/rel like Root.Open: component by component, no
// symlinks anywhere in rel, never above dir, every directory searchable and
// the file readable under w. It serves trees pyexec owns whose content
// someone else wrote (an environment a confined build made) as well as
// the workspace.
func OpenBeneath(dir, rel string, w Rights) (*os.File, error) {
	parts, err := splitRel(dir, rel)
	if err != nil {
		return nil, err
	}
	fd, at, err := walk(dir, parts[:len(parts)-1], w, false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	f, _, err := openFileAt(fd, parts[len(parts)-1], filepath.Join(at, parts[len(parts)-1]), w)
	return f, err
}

// splitRel splits a relative path below dir into its components.
func splitRel(dir, rel string) ([]string, error) {
	parts := strings.Split(filepath.Clean(rel), string(filepath.Separator))
	if filepath.IsAbs(rel) || len(parts) == 0 || parts[0] == ".." || parts[0] == "." {
		return nil, fmt.Errorf("%s: not a path below %s", rel, dir)
	}
	return parts, nil
}

// walk opens dir, then each of parts beneath the previous descriptor, and
// returns an O_PATH descriptor of the last directory and its path. Every
// directory must be searchable under w; a symlink or a non-directory on
// the way is refused. With create, missing directories are made (the
// parent must be writable under w), owned as w's new files are.
func walk(dir string, parts []string, w Rights, create bool) (int, string, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("open %s: %w", dir, err)
	}
	if err := checkFD(fd, dir, w, permExec, true); err != nil {
		unix.Close(fd)
		return -1, "", err
	}
	at := dir
	for _, part := range parts {
		next, err := openat2(fd, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		if create && errors.Is(err, unix.ENOENT) {
			err = mkdirAt(fd, at, part, w)
			if err == nil {
				next, err = openat2(fd, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
			}
		}
		at = filepath.Join(at, part)
		if err != nil {
			err = openError(fd, part, at, err)
			unix.Close(fd)
			return -1, "", err
		}
		unix.Close(fd)
		fd = next
		if err := checkFD(fd, at, w, permExec, true); err != nil {
			unix.Close(fd)
			return -1, "", err
		}
	}
	return fd, at, nil
}

// openat2 opens name in dirfd with the package's resolve rules, retrying
// a lookup a concurrent rename disturbed.
func openat2(dirfd int, name string, flags uint64) (int, error) {
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: resolveNoLinks}
	for {
		fd, err := unix.Openat2(dirfd, name, &how)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		return fd, err
	}
}

// openFileAt opens the regular file name in dirfd for reading and checks
// it is readable under w; path is for messages.
func openFileAt(dirfd int, name, path string, w Rights) (*os.File, *unix.Stat_t, error) {
	// O_NONBLOCK: a FIFO planted in place of the file must not hang the
	// server waiting for a writer (it is then refused as not regular).
	ffd, err := openat2(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, nil, openError(dirfd, name, path, err)
	}
	st, err := checkFDStat(ffd, path, w, permRead, false)
	if err != nil {
		unix.Close(ffd)
		return nil, nil, err
	}
	// Back to blocking reads for an ordinary file.
	if flags, err := unix.FcntlInt(uintptr(ffd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(ffd), unix.F_SETFL, flags&^unix.O_NONBLOCK)
	}
	return os.NewFile(uintptr(ffd), path), st, nil
}

// checkFD checks what fd is: a directory (dir) or a regular file, and that
// w allows want on it.
func checkFD(fd int, path string, w Rights, want uint32, dir bool) error {
	_, err := checkFDStat(fd, path, w, want, dir)
	return err
}

func checkFDStat(fd int, path string, w Rights, want uint32, dir bool) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	switch typ := st.Mode & unix.S_IFMT; {
	case dir && typ != unix.S_IFDIR:
		return nil, fmt.Errorf("%s is not a directory", path)
	case !dir && typ == unix.S_IFDIR:
		return nil, fmt.Errorf("%s %w, not a file", path, ErrIsDir)
	case !dir && typ != unix.S_IFREG:
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if !w.allows(&st, want) {
		return nil, fmt.Errorf("%s (mode %04o, owner %d:%d) is not %s by the run's user (uid %d): %w", path, st.Mode&0o7777, st.Uid, st.Gid, accessName(want), w.UID, fs.ErrPermission)
	}
	return &st, nil
}

func accessName(want uint32) string {
	switch want {
	case permRead:
		return "readable"
	case permWrite | permExec:
		return "writable"
	case permRead | permExec:
		return "listable"
	}
	return "searchable"
}

// openError explains a failed open of name in dirfd (path for messages).
func openError(dirfd int, name, path string, err error) error {
	var st unix.Stat_t
	if errors.Is(err, unix.ENOTDIR) && unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		err = unix.ELOOP // O_DIRECTORY|O_NOFOLLOW on a symlink says ENOTDIR
	}
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s %w", path, ErrChanged)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%s: %w", path, os.ErrNotExist)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s: a component is not a directory: %w", path, os.ErrNotExist)
	}
	return fmt.Errorf("open %s: %w", path, err)
}

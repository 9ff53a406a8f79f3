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

// allows tells whether the run could access a file with owner uid, group
// gid and mode, wanting want (permRead, permExec).
func (w Rights) allows(st *unix.Stat_t, want uint32) bool {
	if w.Server {
		return true
	}
	uid, gid := st.Uid, st.Gid
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
	perm := st.Mode & 0o7
	switch {
	case uid == w.UID:
		perm = (st.Mode >> 6) & 0o7
	case gid == w.GID:
		perm = (st.Mode >> 3) & 0o7
	}
	return perm&want == want
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
	parts := strings.Split(filepath.Clean(rel), string(filepath.Separator))
	if filepath.IsAbs(rel) || len(parts) == 0 || parts[0] == ".." || parts[0] == "." {
		return nil, fmt.Errorf("%s: not a path below %s", rel, dir)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	if err := checkFD(fd, dir, w, permExec, true); err != nil {
		return nil, err
	}
	at := dir
	for _, part := range parts[:len(parts)-1] {
		next, err := unix.Openat2(fd, part, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: resolveNoLinks,
		})
		at = filepath.Join(at, part)
		if err != nil {
			return nil, openError(fd, part, at, err)
		}
		unix.Close(fd)
		fd = next
		if err := checkFD(fd, at, w, permExec, true); err != nil {
			return nil, err
		}
	}
	last := filepath.Join(at, parts[len(parts)-1])
	// O_NONBLOCK: a FIFO planted in place of the file must not hang the
	// server waiting for a writer (it is then refused as not regular).
	ffd, err := unix.Openat2(fd, parts[len(parts)-1], &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: resolveNoLinks,
	})
	if err != nil {
		return nil, openError(fd, parts[len(parts)-1], last, err)
	}
	if err := checkFD(ffd, last, w, permRead, false); err != nil {
		unix.Close(ffd)
		return nil, err
	}
	// Back to blocking reads for an ordinary file.
	if flags, err := unix.FcntlInt(uintptr(ffd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(ffd), unix.F_SETFL, flags&^unix.O_NONBLOCK)
	}
	return os.NewFile(uintptr(ffd), last), nil
}

// checkFD checks what fd is: a directory (dir) or a regular file, and that
// w allows want on it.
func checkFD(fd int, path string, w Rights, want uint32, dir bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	switch typ := st.Mode & unix.S_IFMT; {
	case dir && typ != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory", path)
	case !dir && typ != unix.S_IFREG:
		return fmt.Errorf("%s is not a regular file", path)
	}
	if !w.allows(&st, want) {
		what := "read"
		if want == permExec {
			what = "search"
		}
		return fmt.Errorf("%s (mode %04o, owner %d:%d) is not %sable by the run's user (uid %d): %w", path, st.Mode&0o7777, st.Uid, st.Gid, what, w.UID, fs.ErrPermission)
	}
	return nil
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

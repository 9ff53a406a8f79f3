package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func infoFrom(rel string, st *unix.Stat_t) FileInfo {
	fi := FileInfo{Path: rel, Size: st.Size, Mode: fmt.Sprintf("%04o", st.Mode&0o7777), ModTime: time.Unix(st.Mtim.Unix()).UTC()}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		fi.Type, fi.MIME = "file", MIMEType(rel)
	case unix.S_IFDIR:
		fi.Type, fi.Size = "dir", 0
	case unix.S_IFLNK:
		fi.Type = "symlink"
	default:
		fi.Type = "other"
	}
	return fi
}

func (r *Root) parentOf(p string, w Rights, create bool) (int, string, string, error) {
	rel := r.rel(p)
	if rel == "" {
		return -1, "", "", fmt.Errorf("names the workspace itself, not a file in it: %w", ErrInvalidPath)
	}
	parts := strings.Split(rel, "/")
	fd, at, err := walk(r.dir, parts[:len(parts)-1], w, create)
	if err != nil {
		return -1, "", "", err
	}
	return fd, parts[len(parts)-1], filepath.Join(at, parts[len(parts)-1]), nil
}

func (r *Root) Stat(p string, w Rights) (FileInfo, error) {
	var fi FileInfo
	err := r.followInside(p, true, func(p string) error {
		if r.rel(p) == "" {
			fd, _, err := walk(r.dir, nil, w, false)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return fmt.Errorf("stat %s: %w", r.dir, err)
			}
			fi = infoFrom("", &st)
			return nil
		}
		dir, name, full, err := r.parentOf(p, w, false)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		var st unix.Stat_t
		if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return openError(dir, name, full, err)
		}
		fi = infoFrom(r.rel(p), &st)
		return nil
	})
	return fi, err
}

func (r *Root) OpenFile(p string, w Rights) (*os.File, FileInfo, error) {
	var f *os.File
	var fi FileInfo
	err := r.followInside(p, false, func(p string) error {
		dir, name, full, err := r.parentOf(p, w, false)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		file, st, err := openFileAt(dir, name, full, w)
		if err != nil {
			return err
		}
		f, fi = file, infoFrom(r.rel(p), st)
		return nil
	})
	return f, fi, err
}

func (r *Root) ReadAt(p string, w Rights, off, length int64) ([]byte, FileInfo, error) {
	if off < 0 || length < 0 {
		return nil, FileInfo{}, fmt.Errorf("offset %d and length %d must be >= 0: %w", off, length, ErrInvalidPath)
	}
	f, fi, err := r.OpenFile(p, w)
	if err != nil {
		return nil, FileInfo{}, err
	}
	defer f.Close()
	if off >= fi.Size {
		return nil, fi, nil
	}
	buf := make([]byte, min(length, fi.Size-off))
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fi, fmt.Errorf("read %s: %w", fi.Path, err)
	}
	return buf[:n], fi, nil
}

func (r *Root) WriteFile(p string, w Rights, src io.Reader, o WriteOptions) (FileInfo, error) {
	var fi FileInfo
	err := r.followInside(p, true, func(p string) error {
		var err error
		fi, err = r.write(p, w, src, o)
		return err
	})
	return fi, err
}

func (r *Root) write(p string, w Rights, src io.Reader, o WriteOptions) (FileInfo, error) {
	dir, name, full, err := r.parentOf(p, w, o.MkdirAll)
	if err != nil {
		return FileInfo{}, err
	}
	defer unix.Close(dir)
	dirSt, err := checkFDStat(dir, filepath.Dir(full), w, permWrite|permExec, true)
	if err != nil {
		return FileInfo{}, err
	}
	var st unix.Stat_t
	switch err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return FileInfo{}, fmt.Errorf("%s %w", full, ErrIsDir)
	case err == nil && !o.Overwrite:
		return FileInfo{}, fmt.Errorf("%s already exists (pass overwrite to replace it): %w", full, fs.ErrExist)
	case err == nil && !w.mayReplace(dirSt, &st):
		return FileInfo{}, fmt.Errorf("%s belongs to another user in a sticky directory: %w", full, fs.ErrPermission)
	}
	tmp, f, err := createTemp(dir, name, w)
	if err != nil {
		return FileInfo{}, fmt.Errorf("create a file in %s: %w", filepath.Dir(full), err)
	}
	done := false
	defer func() {
		f.Close()
		if !done {
			unix.Unlinkat(dir, tmp, 0)
		}
	}()
	limit := o.MaxBytes
	if limit <= 0 {
		limit = 1 << 62
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, sum), io.LimitReader(src, limit+1))
	if err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", full, err)
	}
	if n > limit {
		return FileInfo{}, fmt.Errorf("the content of %s is larger than the upload limit of %d bytes (--max-upload): %w", r.rel(p), limit, ErrTooLarge)
	}
	flags := uint(unix.RENAME_NOREPLACE)
	if o.Overwrite {
		flags = 0
	}
	if err := unix.Renameat2(dir, tmp, dir, name, flags); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return FileInfo{}, fmt.Errorf("%s already exists (pass overwrite to replace it): %w", full, fs.ErrExist)
		}
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) {
			return FileInfo{}, fmt.Errorf("%s %w", full, ErrIsDir)
		}
		return FileInfo{}, fmt.Errorf("rename into %s: %w", full, err)
	}
	done = true
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return FileInfo{}, fmt.Errorf("stat %s: %w", full, err)
	}
	fi := infoFrom(r.rel(p), &st)
	fi.SHA256 = hexSum(sum)
	return fi, nil
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

func createTemp(dir int, name string, w Rights) (string, *os.File, error) {
	for i := 0; ; i++ {
		tmp := fmt.Sprintf(".%s.pyexec-%d-%d", name, os.Getpid(), time.Now().UnixNano()+int64(i))
		if len(tmp) > 255 {
			tmp = fmt.Sprintf(".pyexec-upload-%d-%d", os.Getpid(), time.Now().UnixNano()+int64(i))
		}
		fd, err := unix.Openat2(dir, tmp, &unix.OpenHow{Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC, Mode: 0o600, Resolve: resolveNoLinks})
		if errors.Is(err, unix.EEXIST) && i < 10 {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		if uid, gid, chown := w.newOwner(); chown {
			if err := unix.Fchown(fd, uid, gid); err != nil {
				unix.Close(fd)
				unix.Unlinkat(dir, tmp, 0)
				return "", nil, fmt.Errorf("give the new file to the run user: %w", err)
			}
		}
		if err := unix.Fchmod(fd, 0o644); err != nil {
			unix.Close(fd)
			unix.Unlinkat(dir, tmp, 0)
			return "", nil, err
		}
		return tmp, os.NewFile(uintptr(fd), tmp), nil
	}
}

func mkdirAt(dirfd int, at, name string, w Rights) error {
	if err := checkFD(dirfd, at, w, permWrite|permExec, true); err != nil {
		return err
	}
	if err := unix.Mkdirat(dirfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	if uid, gid, chown := w.newOwner(); chown {
		if err := unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("give %s to the run user: %w", filepath.Join(at, name), err)
		}
	}
	return nil
}

func (r *Root) Delete(p string, w Rights) error {
	return r.followInside(p, true, func(p string) error {
		dir, name, full, err := r.parentOf(p, w, false)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		dirSt, err := checkFDStat(dir, filepath.Dir(full), w, permWrite|permExec, true)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return openError(dir, name, full, err)
		}
		if !w.mayReplace(dirSt, &st) {
			return fmt.Errorf("%s belongs to another user in a sticky directory: %w", full, fs.ErrPermission)
		}
		flags := 0
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			flags = unix.AT_REMOVEDIR
		}
		switch err := unix.Unlinkat(dir, name, flags); {
		case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
			return fmt.Errorf("%s is a directory that is not empty; delete its files first: %w", full, fs.ErrExist)
		case err != nil:
			return openError(dir, name, full, err)
		}
		return nil
	})
}

func (r *Root) List(p string, w Rights, o ListOptions) (entries []FileInfo, truncated bool, err error) {
	if o.Limit <= 0 {
		o.Limit = 1000
	}
	if o.Pattern != "" {
		if _, err := path.Match(o.Pattern, ""); err != nil {
			return nil, false, fmt.Errorf("pattern %q: %v: %w", o.Pattern, err, ErrInvalidPath)
		}
	}
	err = r.followInside(p, false, func(p string) error {
		entries, truncated = nil, false
		rel := r.rel(p)
		var parts []string
		if rel != "" {
			parts = strings.Split(rel, "/")
		}
		fd, at, err := walk(r.dir, parts, w, false)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		l := lister{r: r, w: w, o: o, base: rel}
		if err := l.dir(fd, at, rel); err != nil {
			return err
		}
		entries, truncated = l.out, l.truncated
		return nil
	})
	return entries, truncated, err
}

type lister struct {
	r         *Root
	w         Rights
	o         ListOptions
	base      string
	out       []FileInfo
	truncated bool
}

func (l *lister) dir(dirfd int, at, rel string) error {
	fd, err := openat2(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return openError(dirfd, ".", at, err)
	}
	f := os.NewFile(uintptr(fd), at)
	defer f.Close()
	if err := checkFD(fd, at, l.w, permRead|permExec, true); err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list %s: %w", at, err)
	}
	slices.Sort(names)
	for _, name := range names {
		full := filepath.Join(at, name)
		if l.r.isHidden(full) || strings.HasPrefix(name, ".") && strings.Contains(name, ".pyexec-") {
			continue // the state dir; a write in progress
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		p := path.Join(rel, name)
		if l.match(name, p) {
			if len(l.out) >= l.o.Limit {
				l.truncated = true
				return nil
			}
			l.out = append(l.out, infoFrom(p, &st))
		}
		if l.o.Recursive && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sub, err := openat2(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
			if err != nil {
				continue
			}
			if checkFD(sub, full, l.w, permExec, true) == nil {
				_ = l.dir(sub, full, p) // one the run user cannot list is skipped
			}
			unix.Close(sub)
			if l.truncated {
				return nil
			}
		}
	}
	return nil
}

func (l *lister) match(name, p string) bool {
	if l.o.Pattern == "" {
		return true
	}
	if strings.Contains(l.o.Pattern, "/") {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, l.base), "/")
		ok, _ := path.Match(l.o.Pattern, rel)
		return ok
	}
	ok, _ := path.Match(l.o.Pattern, name)
	return ok
}

package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"mime"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The files tools (write_file, read_file, list_files, the REST /v1/files
// routes, the pyexec://workspace/ resources) act on the workspace for a
// client that shares no filesystem with the server. They follow the rules
// of script_path: a path is relative to the workspace or absolute inside
// it, a symlink is followed only while it stays inside, and everything is
// held to the run user's rights. On top of that a write never goes
// through a link: the new content goes to a fresh file (mode 0644, never
// setuid, owned as the run's files) renamed over the name, so a symlink or
// a hard link there is replaced, not written through.

// Errors the files operations wrap, for callers that map them to statuses.
var (
	// ErrInvalidPath: the path can never name a file of the workspace.
	ErrInvalidPath = errors.New("invalid path")
	// ErrTooLarge: the content passed the upload limit.
	ErrTooLarge = errors.New("content too large")
)

// FileInfo describes one entry of the workspace.
type FileInfo struct {
	Path    string    `json:"path" jsonschema:"Path relative to the workspace."`
	Type    string    `json:"type" jsonschema:"file, dir, symlink or other."`
	Size    int64     `json:"size" jsonschema:"Size in bytes (files; 0 for directories)."`
	Mode    string    `json:"mode" jsonschema:"Permission bits, octal."`
	ModTime time.Time `json:"mod_time" jsonschema:"Last modification time (UTC)."`
	MIME    string    `json:"mime,omitempty" jsonschema:"Media type guessed from the name (files)."`
	SHA256  string    `json:"sha256,omitempty" jsonschema:"SHA-256 of the content, hex (files just written)."`
}

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

// MIMEType guesses a file's media type from its name; text formats a model
// reads often are named even where the system's table lacks them.
func MIMEType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	switch ext {
	case ".py", ".txt", ".log", ".toml", ".cfg", ".ini", ".env", ".rst", ".lock", ".sh", ".ipynb_checkpoints":
		return "text/plain"
	case ".md":
		return "text/markdown"
	case ".csv":
		return "text/csv"
	case ".tsv":
		return "text/tab-separated-values"
	case ".json", ".ipynb":
		return "application/json"
	case ".yaml", ".yml":
		return "application/yaml"
	case ".parquet":
		return "application/vnd.apache.parquet"
	}
	if t := mime.TypeByExtension(ext); t != "" {
		if base, _, err := mime.ParseMediaType(t); err == nil {
			return base
		}
		return t
	}
	return "application/octet-stream"
}

// HideTree makes dir (pyexec's state directory when it lies in the
// workspace) invisible to the files operations: it is refused by name and
// left out of listings, as runs cannot see it either.
func (r *Root) HideTree(dir string) *Root {
	c := *r
	c.hidden = append(slices.Clone(r.hidden), filepath.Clean(dir))
	return &c
}

func (r *Root) isHidden(p string) bool {
	for _, h := range r.hidden {
		if Within(h, p) {
			return true
		}
	}
	return false
}

// FilePath checks a path a client named for the files operations and
// returns it absolute and clean: relative to the workspace, or absolute
// inside it. It checks the name only; symlinks are dealt with on access.
func (r *Root) FilePath(p string) (string, error) {
	switch {
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("%q contains a NUL byte: %w", p, ErrInvalidPath)
	case len(p) > 4096:
		return "", fmt.Errorf("path is %d bytes long, more than the limit of 4096: %w", len(p), ErrInvalidPath)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(r.dir, p)
	}
	abs = filepath.Clean(abs)
	if !r.Contains(abs) {
		return "", fmt.Errorf("%q is outside the workspace %s: %w", p, r.dir, ErrInvalidPath)
	}
	if r.isHidden(abs) {
		return "", fmt.Errorf("%q is in pyexec's state directory, which is not part of the workspace: %w", p, ErrInvalidPath)
	}
	return abs, nil
}

// rel is path relative to the workspace, slash-separated ("" for the root).
func (r *Root) rel(p string) string {
	rel, err := filepath.Rel(r.dir, p)
	if err != nil || rel == "." {
		return ""
	}
	return filepath.ToSlash(rel)
}

// followInside runs op on p; when op meets a symlink (ErrChanged), p is
// resolved (all of it, or all but its last component with keepLast) and op
// runs once more on the result if that stays in the workspace. The second
// op walks race-free again, so a link swapped in meanwhile is refused.
func (r *Root) followInside(p string, keepLast bool, op func(p string) error) error {
	err := op(p)
	if !errors.Is(err, ErrChanged) {
		return err
	}
	real, rerr := resolveExisting(p, keepLast)
	if rerr != nil {
		return err
	}
	if !r.Contains(real) || r.isHidden(real) {
		return fmt.Errorf("%s resolves (through a symlink) to %s, outside the workspace %s: %w", r.rel(p), real, r.dir, fs.ErrPermission)
	}
	if real == p {
		return err
	}
	return op(real)
}

// resolveExisting resolves the symlinks of the longest existing prefix of
// p (of its parent with keepLast) and appends the rest.
func resolveExisting(p string, keepLast bool) (string, error) {
	if keepLast {
		dir, err := resolveExisting(filepath.Dir(p), false)
		if err != nil {
			return "", err
		}
		return filepath.Join(dir, filepath.Base(p)), nil
	}
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || cur == filepath.Dir(cur) {
			return "", err
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// parentOf opens the directory holding p (inside the workspace, not the
// root itself) race-free, and returns it with p's last component.
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

// Stat describes p without following a symlink at its end.
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

// OpenFile opens the regular file p for reading, with its info; symlinks
// inside the workspace are followed.
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

// ReadAt reads up to length bytes of file p from offset off.
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

// WriteOptions tune WriteFile.
type WriteOptions struct {
	Overwrite bool  // replace an existing file
	MaxBytes  int64 // refuse content larger than this (> 0)
	MkdirAll  bool  // create missing parent directories
}

// WriteFile stores what src holds at p: a fresh file, filled, then renamed
// over the name (RENAME_NOREPLACE unless overwrite), so a reader never sees
// half a file and a link at the name is replaced, never followed. The
// parent must be writable by the run user, and in a sticky directory an
// existing file must be theirs.
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

// createTemp makes a fresh file next to name: mode 0600 while it is
// filled, given to the run user, then 0644 (never setuid or setgid, the
// umask notwithstanding).
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

// mkdirAt creates directory name in dirfd (at is its path) for the run
// user: the parent must be writable under w.
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

// Delete removes file p (or an empty directory). A symlink there is
// removed itself, never its target.
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

// ListOptions tune List.
type ListOptions struct {
	// Pattern is a shell pattern matched against names, or against paths
	// relative to the listed directory when it has a slash.
	Pattern   string
	Recursive bool
	Limit     int // most entries (default 1000)
}

// List returns the entries of directory p, sorted by name within each
// directory, depth first; truncated says the limit cut it short. Symlinks
// are listed, never followed; directories the run user cannot list are
// skipped.
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

// dir lists the directory dirfd (an O_PATH descriptor of at, rel in the
// workspace).
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

// URIPrefix starts the URI of a workspace file (the resource template
// pyexec://workspace/{+path}).
const URIPrefix = "pyexec://workspace/"

// URI names the workspace file rel (slash-separated) as a resource.
func URI(rel string) string {
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return URIPrefix + strings.Join(parts, "/")
}

// ParseURI returns the workspace path a URI names.
func ParseURI(uri string) (string, error) {
	rest, ok := strings.CutPrefix(uri, URIPrefix)
	if !ok {
		return "", fmt.Errorf("%q is not a workspace URI (%s{path}): %w", uri, URIPrefix, ErrInvalidPath)
	}
	rel, err := url.PathUnescape(rest)
	if err != nil {
		return "", fmt.Errorf("%q: %v: %w", uri, err, ErrInvalidPath)
	}
	return rel, nil
}

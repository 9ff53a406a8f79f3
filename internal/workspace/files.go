package workspace

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FileInfo describes one entry of the workspace.
type FileInfo struct {
	Path    string    `json:"path" jsonschema:"Path relative to the workspace root."`
	Type    string    `json:"type" jsonschema:"file, dir, symlink or other."`
	Size    int64     `json:"size" jsonschema:"Size in bytes (files)."`
	Mode    string    `json:"mode" jsonschema:"Permission bits, octal."`
	ModTime time.Time `json:"mod_time" jsonschema:"Last modification time."`
	MIME    string    `json:"mime,omitempty" jsonschema:"Media type guessed from the name (files)."`
}

func infoFrom(rel string, st *unix.Stat_t) FileInfo {
	fi := FileInfo{Path: rel, Size: st.Size, Mode: fmt.Sprintf("%04o", st.Mode&0o7777), ModTime: time.Unix(st.Mtim.Unix())}
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

// MIMEType guesses a file's media type from its name.
func MIMEType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	switch ext {
	case ".py", ".txt", ".log", ".md", ".toml", ".cfg", ".ini", ".env", ".rst":
		if ext == ".md" {
			return "text/markdown"
		}
		return "text/plain"
	case ".csv":
		return "text/csv"
	case ".json":
		return "application/json"
	case ".yaml", ".yml":
		return "application/yaml"
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return strings.TrimSuffix(t, "; charset=utf-8")
	}
	return "application/octet-stream"
}

// OpenFile opens a regular file for reading and returns it with its info.
// It refuses special files (a FIFO would block the server), files with
// other hard links (a link can make a file from outside the workspace
// appear inside it) and files runs could not read.
func (r *Root) OpenFile(field, rel string) (*os.File, FileInfo, error) {
	dir, name, err := r.parent(field, rel)
	if err != nil {
		return nil, FileInfo{}, err
	}
	defer unix.Close(dir)
	fd, err := openat2(dir, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, FileInfo{}, lookupError(field, rel, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, FileInfo{}, &Error{Field: field, Path: rel, Msg: "cannot be examined", Err: err}
	}
	if err := checkReadable(r.id, &st); err != nil {
		unix.Close(fd)
		return nil, FileInfo{}, &Error{Field: field, Path: rel, Msg: err.Error(), Err: os.ErrPermission}
	}
	return os.NewFile(uintptr(fd), rel), infoFrom(rel, &st), nil
}

func checkReadable(id Identity, st *unix.Stat_t) error {
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return errors.New("is a directory (list it with list_files)")
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return errors.New("is not a regular file")
	case st.Nlink > 1:
		return fmt.Errorf("has %d hard links; it is refused because a link can bring a file from outside the workspace into it", st.Nlink)
	}
	return id.allows(st, AccessRead)
}

// ReadFile reads up to length bytes from offset off of a file.
func (r *Root) ReadFile(field, rel string, off, length int64) ([]byte, FileInfo, error) {
	f, fi, err := r.OpenFile(field, rel)
	if err != nil {
		return nil, FileInfo{}, err
	}
	defer f.Close()
	if off < 0 || length < 0 {
		return nil, fi, &Error{Field: field, Path: rel, Msg: "offset and length must be >= 0"}
	}
	if off >= fi.Size {
		return nil, fi, nil
	}
	buf := make([]byte, min(length, fi.Size-off))
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fi, &Error{Field: field, Path: rel, Msg: "cannot be read", Err: err}
	}
	return buf[:n], fi, nil
}

// Stat describes rel without following a symlink at its end.
func (r *Root) Stat(field, rel string) (FileInfo, error) {
	if rel == "" {
		var st unix.Stat_t
		if err := unix.Fstat(int(r.f.Fd()), &st); err != nil {
			return FileInfo{}, err
		}
		return infoFrom("", &st), nil
	}
	dir, name, err := r.parent(field, rel)
	if err != nil {
		return FileInfo{}, err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return FileInfo{}, lookupError(field, rel, err)
	}
	return infoFrom(rel, &st), nil
}

// WriteOptions tune WriteFile.
type WriteOptions struct {
	Overwrite bool  // replace an existing file
	MaxBytes  int64 // refuse content larger than this (> 0)
	MkdirAll  bool  // create missing parent directories
}

// ErrTooLarge is wrapped by WriteFile when the content exceeds MaxBytes.
var ErrTooLarge = errors.New("content too large")

// WriteFile stores the content of src at rel. Why a temp file and a
// rename: the new file is created fresh (mode 0644, never setuid, owned by
// the runs' identity), and renaming it over the name replaces a symlink or
// a hard link rather than writing through it; a reader never sees half a
// file. The parent must be writable by runs.
func (r *Root) WriteFile(field, rel string, src io.Reader, o WriteOptions) (FileInfo, error) {
	if rel == "" {
		return FileInfo{}, &Error{Field: field, Msg: "is empty: name a file"}
	}
	dirRel, name := path.Split(rel)
	dirRel = strings.TrimSuffix(dirRel, "/")
	if o.MkdirAll && dirRel != "" {
		if err := r.mkdirAll(field, dirRel); err != nil {
			return FileInfo{}, err
		}
	}
	dir, err := r.walkDir(field, dirRel)
	if err != nil {
		return FileInfo{}, err
	}
	defer unix.Close(dir)
	if err := r.id.allowsFD(dir, AccessWrite|AccessExec); err != nil {
		return FileInfo{}, &Error{Field: field, Path: rel, Msg: "cannot be written: its directory " + err.Error(), Err: os.ErrPermission}
	}
	tmpName, f, err := createTemp(dir, name)
	if err != nil {
		return FileInfo{}, &Error{Field: field, Path: rel, Msg: "cannot be created", Err: err}
	}
	ok := false
	defer func() {
		f.Close()
		if !ok {
			unix.Unlinkat(dir, tmpName, 0)
		}
	}()
	if r.id.Checked && uint32(os.Geteuid()) != r.id.UID {
		if err := unix.Fchown(int(f.Fd()), int(r.id.UID), int(r.id.GID)); err != nil {
			return FileInfo{}, &Error{Field: field, Path: rel, Msg: "cannot be given to the runs' user", Err: err}
		}
	}
	limit := o.MaxBytes
	if limit <= 0 {
		limit = 1 << 62
	}
	n, err := io.Copy(f, io.LimitReader(src, limit+1))
	if err != nil {
		return FileInfo{}, &Error{Field: field, Path: rel, Msg: "could not be written: " + err.Error(), Err: err}
	}
	if n > limit {
		return FileInfo{}, &Error{Field: field, Path: rel, Msg: fmt.Sprintf("content is larger than the upload limit of %d bytes (--max-upload)", limit), Err: ErrTooLarge}
	}
	flags := uint(unix.RENAME_NOREPLACE)
	if o.Overwrite {
		flags = 0
		var st unix.Stat_t
		if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return FileInfo{}, &Error{Field: field, Path: rel, Msg: "is a directory", Err: unix.EISDIR}
		}
	}
	if err := unix.Renameat2(dir, tmpName, dir, name, flags); err != nil {
		return FileInfo{}, lookupError(field, rel, err)
	}
	ok = true
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return FileInfo{}, err
	}
	return infoFrom(rel, &st), nil
}

func createTemp(dir int, name string) (string, *os.File, error) {
	for i := 0; ; i++ {
		tmp := fmt.Sprintf(".%s.pyexec-%d-%d", name, os.Getpid(), time.Now().UnixNano()+int64(i))
		if len(tmp) > 255 {
			tmp = fmt.Sprintf(".pyexec-upload-%d-%d", os.Getpid(), time.Now().UnixNano()+int64(i))
		}
		fd, err := openat2(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
		if errors.Is(err, unix.EEXIST) && i < 10 {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		// The umask may have taken bits away; 0644 is what is meant.
		unix.Fchmod(fd, 0o644)
		return tmp, os.NewFile(uintptr(fd), tmp), nil
	}
}

// mkdirAll creates the missing directories of rel, each one beneath the
// previous descriptor.
func (r *Root) mkdirAll(field, rel string) error {
	fd, err := unix.Dup(int(r.f.Fd()))
	if err != nil {
		return err
	}
	defer func() { unix.Close(fd) }()
	for _, part := range strings.Split(rel, "/") {
		next, err := openat2(fd, part, unix.O_PATH|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) {
			if err := r.id.allowsFD(fd, AccessWrite|AccessExec); err != nil {
				return &Error{Field: field, Path: rel, Msg: "cannot be created: " + err.Error(), Err: os.ErrPermission}
			}
			if err := unix.Mkdirat(fd, part, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return lookupError(field, rel, err)
			}
			if r.id.Checked && uint32(os.Geteuid()) != r.id.UID {
				unix.Fchownat(fd, part, int(r.id.UID), int(r.id.GID), unix.AT_SYMLINK_NOFOLLOW)
			}
			next, err = openat2(fd, part, unix.O_PATH|unix.O_DIRECTORY, 0)
		}
		if err != nil {
			return lookupError(field, rel, err)
		}
		unix.Close(fd)
		fd = next
		if err := r.id.allowsFD(fd, AccessExec); err != nil {
			return &Error{Field: field, Path: rel, Msg: err.Error(), Err: os.ErrPermission}
		}
	}
	return nil
}

// Delete removes a file (or an empty directory).
func (r *Root) Delete(field, rel string) error {
	dir, name, err := r.parent(field, rel)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if err := r.id.allowsFD(dir, AccessWrite|AccessExec); err != nil {
		return &Error{Field: field, Path: rel, Msg: "cannot be deleted: its directory " + err.Error(), Err: os.ErrPermission}
	}
	err = unix.Unlinkat(dir, name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return &Error{Field: field, Path: rel, Msg: "is a directory that is not empty; delete its files first", Err: err}
		}
	}
	if err != nil {
		return lookupError(field, rel, err)
	}
	return nil
}

// ListOptions tune List.
type ListOptions struct {
	Pattern   string // shell pattern matched against names (or relative paths when it has a /)
	Recursive bool
	Limit     int // most entries (> 0)
}

// List returns the entries of directory rel, sorted by path within each
// directory; truncated says the limit cut it short. Symlinks are listed,
// never followed; directories runs cannot read are skipped.
func (r *Root) List(field, rel string, o ListOptions) ([]FileInfo, bool, error) {
	if o.Limit <= 0 {
		o.Limit = 1000
	}
	if o.Pattern != "" {
		if _, err := path.Match(o.Pattern, ""); err != nil {
			return nil, false, &Error{Field: "pattern", Path: o.Pattern, Msg: "is not a valid pattern: " + err.Error()}
		}
	}
	parent, err := r.walkDir(field, rel)
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(parent)
	fd, err := openat2(parent, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, false, lookupError(field, rel, err)
	}
	var out []FileInfo
	truncated, err := r.listDir(fd, rel, o, &out)
	if err != nil {
		return nil, false, &Error{Field: field, Path: rel, Msg: err.Error(), Err: os.ErrPermission}
	}
	return out, truncated, nil
}

func (r *Root) listDir(fd int, rel string, o ListOptions, out *[]FileInfo) (bool, error) {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if err := r.id.allowsFD(fd, AccessRead|AccessExec); err != nil {
		return false, err
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return false, err
	}
	slices.Sort(names)
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		p := path.Join(rel, name)
		if match(o.Pattern, name, p) {
			if len(*out) >= o.Limit {
				return true, nil
			}
			*out = append(*out, infoFrom(p, &st))
		}
		if o.Recursive && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sub, err := openat2(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				continue
			}
			truncated, err := r.listDir(sub, p, o, out)
			if truncated {
				return true, nil
			}
			_ = err // a subdirectory runs cannot read is skipped
		}
	}
	return false, nil
}

func match(pattern, name, rel string) bool {
	if pattern == "" {
		return true
	}
	if strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, rel)
		return ok
	}
	ok, _ := path.Match(pattern, name)
	return ok
}

// Package workspace holds the rules for server-side access to trees a run
// may have written: the workspace (files tools, the changed-file scan, the
// workspace resource) and a run's own temp dir (what it displayed).
//
// Why file descriptors rather than paths: a run can replace any directory
// or file it can write with a symlink at any moment, so checking a path and
// then opening it is a race the run can win. Every access here resolves
// beneath an open directory with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
// RESOLVE_NO_MAGICLINKS): no `..` out, no absolute path, no symlink followed,
// whenever it was planted. Permissions are checked against the identity the
// run has on disk (Identity), so the server never reads or writes what the
// run itself could not, even when it is root.
package workspace

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// resolveFlags are the openat2 rules of every lookup.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Root is an open directory that accesses are confined to. It is safe for
// concurrent use; Close it when done.
type Root struct {
	dir string   // the path it was opened as (for messages and URIs)
	f   *os.File // O_PATH descriptor of dir
	id  Identity
}

// OpenRoot opens dir (which must be a directory, and is trusted: the
// server's own configuration) for accesses with id's rights.
func OpenRoot(dir string, id Identity) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	return &Root{dir: dir, f: os.NewFile(uintptr(fd), dir), id: id}, nil
}

// Dir is the directory the root was opened as.
func (r *Root) Dir() string { return r.dir }

// Identity is whose rights accesses are checked against.
func (r *Root) Identity() Identity { return r.id }

// Close releases the directory descriptor.
func (r *Root) Close() error { return r.f.Close() }

// Clean checks a client's relative path and returns it cleaned ("" for
// the root itself). It refuses what could never be inside: absolute paths,
// `..` components, NUL bytes. Symlinks are refused later, at lookup.
func Clean(field, p string) (string, error) {
	switch {
	case strings.ContainsRune(p, 0):
		return "", &Error{Field: field, Path: p, Msg: "contains a NUL byte"}
	case strings.HasPrefix(p, "/"):
		return "", &Error{Field: field, Path: p, Msg: "must be relative to the workspace (no leading /)"}
	}
	c := path.Clean("/" + p)[1:]
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", &Error{Field: field, Path: p, Msg: "must not contain .. (paths stay inside the workspace)"}
		}
	}
	return c, nil
}

// Error is a refused or failed access, naming the request field.
type Error struct {
	Field string
	Path  string
	Msg   string
	Err   error // the system error, when there is one
}

func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %q %s", e.Field, e.Path, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrNotFound is wrapped by errors for paths that do not exist.
var ErrNotFound = os.ErrNotExist

// lookupError turns an openat2 failure into a message a client can act on.
func lookupError(field, p string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return &Error{Field: field, Path: p, Msg: "does not exist in the workspace", Err: os.ErrNotExist}
	case errors.Is(err, unix.ELOOP):
		return &Error{Field: field, Path: p, Msg: "goes through a symlink; files are only read and written through real directories", Err: err}
	case errors.Is(err, unix.EXDEV):
		return &Error{Field: field, Path: p, Msg: "leads outside the workspace", Err: err}
	case errors.Is(err, unix.ENOTDIR):
		return &Error{Field: field, Path: p, Msg: "has a component that is not a directory", Err: err}
	case errors.Is(err, unix.EISDIR):
		return &Error{Field: field, Path: p, Msg: "is a directory", Err: err}
	case errors.Is(err, unix.EEXIST):
		return &Error{Field: field, Path: p, Msg: "already exists (pass overwrite: true to replace it)", Err: os.ErrExist}
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return &Error{Field: field, Path: p, Msg: "is not accessible to runs, so not to this server either", Err: os.ErrPermission}
	}
	return &Error{Field: field, Path: p, Msg: "cannot be opened: " + err.Error(), Err: err}
}

// openat2 resolves rel beneath dirfd with the package's rules.
func openat2(dirfd int, rel string, flags uint64, mode uint64) (int, error) {
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: mode, Resolve: resolveFlags}
	for {
		fd, err := unix.Openat2(dirfd, rel, &how)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue // EAGAIN: a concurrent rename; the lookup is retried
		}
		return fd, err
	}
}

// walkDir opens each directory component of rel (relative to the root) in
// turn, checking search permission for the identity, and returns an O_PATH
// descriptor of the last one. Each step resolves a single name beneath the
// previous descriptor, so nothing can be swapped in between.
func (r *Root) walkDir(field, rel string) (int, error) {
	fd, err := unix.Dup(int(r.f.Fd()))
	if err != nil {
		return -1, fmt.Errorf("%s: dup workspace descriptor: %w", field, err)
	}
	if err := r.id.allowsFD(fd, AccessExec); err != nil {
		unix.Close(fd)
		return -1, &Error{Field: field, Path: rel, Msg: err.Error(), Err: os.ErrPermission}
	}
	if rel == "" {
		return fd, nil
	}
	for _, part := range strings.Split(rel, "/") {
		next, err := openat2(fd, part, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			return -1, lookupError(field, rel, err)
		}
		fd = next
		if err := r.id.allowsFD(fd, AccessExec); err != nil {
			unix.Close(fd)
			return -1, &Error{Field: field, Path: rel, Msg: err.Error(), Err: os.ErrPermission}
		}
	}
	return fd, nil
}

// parent opens the directory holding rel and returns it with rel's last
// component.
func (r *Root) parent(field, rel string) (int, string, error) {
	if rel == "" {
		return -1, "", &Error{Field: field, Path: rel, Msg: "names the workspace itself, not a file"}
	}
	dir, name := path.Split(rel)
	fd, err := r.walkDir(field, strings.TrimSuffix(dir, "/"))
	return fd, name, err
}

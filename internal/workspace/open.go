package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Rights are whose permissions a read on a request's behalf is held to: the
// run user's, as the kernel checks them for the run (mode bits and owner;
// ACLs are not consulted, so a file an ACL alone opens to the run user is
// refused, which errs on the safe side).
type Rights struct {
	// Server: runs execute as the server itself (sandbox policy none), so
	// they could read whatever the server can; nothing more is checked.
	Server bool
	// UID and GID are the run's identity (0 for a run that stays root
	// without capabilities: no CAP_DAC_OVERRIDE, so the mode bits bind it
	// like anyone else).
	UID, GID uint32
	// Idmapped: the workspace is mounted for the run with the server's
	// uid/gid on disk reading as UID/GID (sandbox idmap.go), so the
	// server's files count as the run's own and files on disk owned by UID
	// itself count as another user's.
	Idmapped             bool
	ServerUID, ServerGID uint32
}

// ServerRights are the rights of runs that execute as the server.
var ServerRights = Rights{Server: true}

const (
	permRead  = 4
	permWrite = 2
	permExec  = 1
)

// ErrChanged says a path changed between its check and its open: a
// component became a symlink or left the workspace.
var ErrChanged = errors.New("changed while being opened (a symlink appeared on the way): refused")

// ErrIsDir is wrapped by errors for a directory where a file was meant.
var ErrIsDir = errors.New("is a directory")

// Open opens the regular file at path (absolute, inside the workspace, as
// Resolve returned it) for reading, race-free and with w's rights: it walks
// down from the workspace directory one component at a time, through
// descriptors, refusing symlinks (ErrChanged) and every directory the run
// could not search, then checks the opened file itself (regular, readable
// by the run). What it returns is exactly the file that was checked,
// whatever is renamed or swapped meanwhile.
func (r *Root) Open(path string, w Rights) (*os.File, error) {
	if !r.Contains(path) {
		return nil, fmt.Errorf("%s is outside the workspace %s", path, r.dir)
	}
	rel, err := filepath.Rel(r.dir, path)
	if err != nil || rel == "." {
		return nil, fmt.Errorf("%s: not a file in the workspace", path)
	}
	return OpenBeneath(r.dir, rel, w)
}

// ReadFile is Open, then reads at most limit bytes (an error says so when
// the file is larger).
func (r *Root) ReadFile(path string, w Rights, limit int64) ([]byte, error) {
	f, err := r.Open(path, w)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, limit)
}

func readLimited(f *os.File, limit int64) ([]byte, error) {
	if limit <= 0 {
		return io.ReadAll(f)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes, the most pyexec reads of it", f.Name(), limit)
	}
	return data, nil
}

// Files reads files of the workspace by path for code that finds them
// itself (a project's pyproject.toml and uv.lock), with the path rules
// applied: symlinks that stay inside the workspace are followed (the path
// is resolved, then the resolved path is opened with Open, so a swap in
// between is refused), anything else is refused.
type Files struct {
	Root   *Root
	Rights Rights
	// Limit caps what is read of one file (0: no cap).
	Limit int64
}

// ReadFile reads path; a missing file gives an error wrapping
// fs.ErrNotExist, a file the run user could not read one wrapping
// fs.ErrPermission.
func (f Files) ReadFile(path string) ([]byte, error) {
	var data []byte
	err := f.Root.followInside(path, false, func(p string) error {
		var err error
		data, err = f.Root.ReadFile(p, f.Rights, f.Limit)
		return err
	})
	return data, err
}

package executor

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/pyexec/pyexec/internal/workspace"
)

// Files is workspace file access, for clients that share no filesystem
// with the executing server (a remote agent, pyexec mcp --executor). Local
// and httpapi.Client implement it with the same rules and errors: paths
// relative to the workspace or absolute inside it, symlinks followed only
// while they stay inside, everything held to the run user's rights, writes
// to a fresh file renamed into place (never through a link, never setuid),
// up to the server's upload limit. Errors wrap the workspace package's
// sentinels (ErrInvalidPath, ErrTooLarge, ErrIsDir) and fs.ErrNotExist,
// fs.ErrExist, fs.ErrPermission.
type Files interface {
	WriteFile(ctx context.Context, req WriteFileRequest, content io.Reader) (workspace.FileInfo, error)
	ReadFile(ctx context.Context, req ReadFileRequest) (FileData, error)
	ListFiles(ctx context.Context, req ListFilesRequest) (FileList, error)
	DeleteFile(ctx context.Context, path string) error
}

// WriteFileRequest says where content goes.
type WriteFileRequest struct {
	Path      string
	Overwrite bool // replace an existing file (otherwise that is fs.ErrExist)
}

// ReadFileRequest says which bytes of a file to read.
type ReadFileRequest struct {
	Path   string
	Offset int64
	Length int64 // > 0
}

// FileData is a piece of a file.
type FileData struct {
	Info   workspace.FileInfo
	Offset int64
	Data   []byte
}

// ListFilesRequest says what to list.
type ListFilesRequest struct {
	Path      string // a directory ("" is the workspace)
	Pattern   string
	Recursive bool
	Limit     int
}

// FileList is a directory listing.
type FileList struct {
	Path      string               `json:"path" jsonschema:"The directory listed, relative to the workspace (empty: the workspace)."`
	Entries   []workspace.FileInfo `json:"entries" jsonschema:"Entries sorted by path, depth first."`
	Truncated bool                 `json:"truncated" jsonschema:"True when there were more entries than limit."`
}

// DefaultMaxUpload is the largest file written through Files by default.
const DefaultMaxUpload = 100 << 20

// SetMaxUpload sets the largest file WriteFile accepts (--max-upload).
func (l *Local) SetMaxUpload(n int64) { l.maxUpload = n }

// MaxUpload is the largest file WriteFile accepts.
func (l *Local) MaxUpload() int64 {
	if l.maxUpload <= 0 {
		return DefaultMaxUpload
	}
	return l.maxUpload
}

var _ Files = (*Local)(nil)

func (l *Local) files(p string) (*workspace.Root, workspace.Rights, string, error) {
	root, rights, err := l.eng.Files()
	if err != nil {
		return nil, workspace.Rights{}, "", err
	}
	abs, err := root.FilePath(p)
	return root, rights, abs, err
}

// WriteFile implements Files.
func (l *Local) WriteFile(ctx context.Context, req WriteFileRequest, content io.Reader) (workspace.FileInfo, error) {
	root, rights, abs, err := l.files(req.Path)
	if err != nil {
		return workspace.FileInfo{}, err
	}
	return root.WriteFile(abs, rights, content, workspace.WriteOptions{Overwrite: req.Overwrite, MkdirAll: true, MaxBytes: l.MaxUpload()})
}

// ReadFile implements Files.
func (l *Local) ReadFile(ctx context.Context, req ReadFileRequest) (FileData, error) {
	if req.Offset < 0 || req.Length <= 0 {
		return FileData{}, fmt.Errorf("offset must be >= 0 and length > 0 (got %d and %d): %w", req.Offset, req.Length, workspace.ErrInvalidPath)
	}
	root, rights, abs, err := l.files(req.Path)
	if err != nil {
		return FileData{}, err
	}
	data, fi, err := root.ReadAt(abs, rights, req.Offset, req.Length)
	return FileData{Info: fi, Offset: req.Offset, Data: data}, err
}

// OpenFile opens a file for streaming (the REST server serves it with
// ranges); the caller closes it.
func (l *Local) OpenFile(ctx context.Context, path string) (*os.File, workspace.FileInfo, error) {
	root, rights, abs, err := l.files(path)
	if err != nil {
		return nil, workspace.FileInfo{}, err
	}
	return root.OpenFile(abs, rights)
}

// ListFiles implements Files.
func (l *Local) ListFiles(ctx context.Context, req ListFilesRequest) (FileList, error) {
	root, rights, abs, err := l.files(req.Path)
	if err != nil {
		return FileList{}, err
	}
	entries, truncated, err := root.List(abs, rights, workspace.ListOptions{Pattern: req.Pattern, Recursive: req.Recursive, Limit: req.Limit})
	if err != nil {
		return FileList{}, err
	}
	fi, _ := root.Stat(abs, rights)
	if entries == nil {
		entries = []workspace.FileInfo{}
	}
	return FileList{Path: fi.Path, Entries: entries, Truncated: truncated}, nil
}

// DeleteFile implements Files.
func (l *Local) DeleteFile(ctx context.Context, path string) error {
	root, rights, abs, err := l.files(path)
	if err != nil {
		return err
	}
	return root.Delete(abs, rights)
}

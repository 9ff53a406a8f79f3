package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
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
// Stat describes p without following a symlink at its end.
// OpenFile opens the regular file p for reading, with its info; symlinks
// inside the workspace are followed.
// ReadAt reads up to length bytes of file p from offset off.
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
// createTemp makes a fresh file next to name: mode 0600 while it is
// filled, given to the run user, then 0644 (never setuid or setgid, the
// umask notwithstanding).
// mkdirAt creates directory name in dirfd (at is its path) for the run
// user: the parent must be writable under w.
// Delete removes file p (or an empty directory). A symlink there is
// removed itself, never its target.
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
// dir lists the directory dirfd (an O_PATH descriptor of at, rel in the
// workspace).
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

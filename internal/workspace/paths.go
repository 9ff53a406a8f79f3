// Package workspace holds the rules for paths a request names (script_path,
// cwd, env_file, a project's files): where they may point, and how the
// server opens them on a request's behalf. Everything in the workspace may
// have been written by a run, so every open is race-free (a component
// swapped for a symlink between the check and the read is refused, never
// followed) and held to the run user's rights, not the server's.
//
// Runs, the files tools (files.go) and the changed-file scan (changes.go)
// share these rules; callers only add the field names to the errors.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Root is a workspace: a clean absolute directory with its symlinks
// resolved.
type Root struct {
	dir    string
	hidden []string // trees the files operations refuse (HideTree)
}

// NewRoot resolves dir (absolute, symlinks followed) and checks it is a
// directory.
func NewRoot(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", real)
	}
	return &Root{dir: real}, nil
}

// Dir is the workspace directory.
func (r *Root) Dir() string { return r.dir }

// Contains reports whether path (clean, absolute) is the workspace or lies
// below it.
func (r *Root) Contains(path string) bool { return Within(r.dir, path) }

// Within reports whether path equals root or lies below it; both must be
// clean absolute paths.
func Within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// Resolve resolves p (relative paths against base) with every symlink
// followed, and rejects it unless the result lies in the workspace.
// Resolving symlinks first is what stops a link inside the workspace from
// pointing a run at a file outside it. The result is a check, not a
// capability: whoever opens it must do so with Open, which refuses a path
// that changed since.
func (r *Root) Resolve(p, base string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errors.New("contains a NUL byte")
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(base, abs)
	}
	abs = filepath.Clean(abs)
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		// Say "outside" rather than "missing" for paths that could never be
		// allowed, so probing the host's filesystem reveals nothing.
		if !r.Contains(abs) {
			return "", fmt.Errorf("%q is outside the workspace %s", p, r.dir)
		}
		return "", fmt.Errorf("%q does not exist in the workspace %s", p, r.dir)
	}
	if err != nil {
		if !r.Contains(abs) {
			return "", fmt.Errorf("%q is outside the workspace %s", p, r.dir)
		}
		return "", fmt.Errorf("%q cannot be resolved: %v", p, err)
	}
	if !r.Contains(real) {
		if real != abs {
			return "", fmt.Errorf("%q resolves (through a symlink) to %s, outside the workspace %s", p, real, r.dir)
		}
		return "", fmt.Errorf("%q is outside the workspace %s", p, r.dir)
	}
	return real, nil
}

// ResolveDir is Resolve for a working directory ("" is the workspace).
func (r *Root) ResolveDir(p string) (string, error) {
	if p == "" {
		return r.dir, nil
	}
	dir, err := r.Resolve(p, r.dir)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%q is not a directory", p)
	}
	return dir, nil
}

// ResolveScript is Resolve for a script: a .py regular file, relative
// paths against cwd.
func (r *Root) ResolveScript(p, cwd string) (string, error) {
	if !strings.HasSuffix(p, ".py") {
		return "", fmt.Errorf("%q is not a .py file", p)
	}
	file, err := r.Resolve(p, cwd)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(file)
	if err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%q is not a regular file", p)
	}
	return file, nil
}

package engine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// insideWorkspace resolves p (relative paths against base) with every
// symlink followed, and rejects it unless the result lies in the workspace.
// Resolving symlinks first is what stops a link inside the workspace from
// pointing a run at a file outside it.
func (e *Engine) insideWorkspace(field, p, base string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", badRequest(field, "contains a NUL byte")
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
		if !within(e.cfg.Workspace, abs) {
			return "", badRequest(field, "%q is outside the workspace %s", p, e.cfg.Workspace)
		}
		return "", badRequest(field, "%q does not exist in the workspace %s", p, e.cfg.Workspace)
	}
	if err != nil {
		return "", badRequest(field, "%q cannot be resolved: %v", p, err)
	}
	if !within(e.cfg.Workspace, real) {
		if real != abs {
			return "", badRequest(field, "%q resolves (through a symlink) to %s, outside the workspace %s", p, real, e.cfg.Workspace)
		}
		return "", badRequest(field, "%q is outside the workspace %s", p, e.cfg.Workspace)
	}
	return real, nil
}

// within reports whether path equals root or lies below it; both must be
// clean absolute paths.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

func (e *Engine) resolveCwd(cwd string) (string, error) {
	if cwd == "" {
		return e.cfg.Workspace, nil
	}
	dir, err := e.insideWorkspace("cwd", cwd, e.cfg.Workspace)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", badRequest("cwd", "%q is not a directory", cwd)
	}
	return dir, nil
}

func (e *Engine) resolveScript(scriptPath, cwd string) (string, error) {
	if !strings.HasSuffix(scriptPath, ".py") {
		return "", badRequest("script_path", "%q is not a .py file", scriptPath)
	}
	p, err := e.insideWorkspace("script_path", scriptPath, cwd)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return "", badRequest("script_path", "%q is not a regular file", scriptPath)
	}
	return p, nil
}

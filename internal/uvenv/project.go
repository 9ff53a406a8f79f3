package uvenv

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/pyexec/pyexec/internal/workspace"
)

// Project is a uv project found around a script: the directory `uv run`
// would sync for it.
type Project struct {
	// Dir holds the pyproject.toml with a [project] table nearest to the
	// script; `uv sync` runs here.
	Dir string
	// Root is the uv workspace root holding the lock: an ancestor of Dir whose
	// pyproject.toml has [tool.uv.workspace], else Dir itself.
	Root string
	// Lock is Root/uv.lock when it exists, else "".
	Lock string
}

// pyproject is the part of pyproject.toml that decides whether uv treats a
// directory as a project.
type pyproject struct {
	Project *struct {
		Name string `toml:"name"`
	} `toml:"project"`
	Tool struct {
		UV struct {
			Managed   *bool     `toml:"managed"`
			Workspace *struct{} `toml:"workspace"`
		} `toml:"uv"`
	} `toml:"tool"`
}

// FileReader reads a project's files (pyproject.toml, uv.lock) on a
// request's behalf. Every one of them may have been written by a run, so
// the engine's reader opens them race-free with the run user's rights
// (workspace.Files). A missing file is an error wrapping fs.ErrNotExist, an
// unreadable one fs.ErrPermission.
type FileReader interface {
	ReadFile(path string) ([]byte, error)
}

// maxProjectFile caps what is read of one project file.
const maxProjectFile = 16 << 20

// defaultFiles reads below root race-free with the server's own rights, for
// callers that give no FileReader.
func defaultFiles(root string) (FileReader, error) {
	r, err := workspace.NewRoot(root)
	if err != nil {
		return nil, fmt.Errorf("find project: %w", err)
	}
	return workspace.Files{Root: r, Rights: workspace.ServerRights, Limit: maxProjectFile}, nil
}

// FindProject walks up from start (a script's directory or the cwd) to root
// (the workspace; "" means the filesystem root) and returns the nearest directory whose pyproject.toml
// makes it a uv project. It never looks above root, so a pyproject.toml
// outside the workspace cannot capture its runs.
func FindProject(start, root string) (dir string, ok bool) {
	p, ok, err := DetectProject(nil, start, root)
	if err != nil || !ok {
		return "", false
	}
	return p.Dir, true
}

// DetectProject is FindProject with the workspace root and lock, and with
// the error of a pyproject.toml that does not parse (uv would fail on it too,
// so saying so is better than silently running without the project). files
// reads them (nil: race-free below root with the server's rights).
func DetectProject(files FileReader, start, root string) (Project, bool, error) {
	start, err := filepath.Abs(start)
	if err != nil {
		return Project{}, false, fmt.Errorf("find project: %w", err)
	}
	if root != "" {
		if root, err = filepath.Abs(root); err != nil {
			return Project{}, false, fmt.Errorf("find project: %w", err)
		}
		if !within(start, root) {
			return Project{}, false, nil
		}
	} else {
		root = "/"
	}
	if files == nil {
		if files, err = defaultFiles(root); err != nil {
			return Project{}, false, err
		}
	}
	var p Project
	for dir := start; ; {
		pp, exists, err := readPyproject(files, dir)
		if err != nil {
			return Project{}, false, err
		}
		if exists {
			managed := pp.Tool.UV.Managed == nil || *pp.Tool.UV.Managed
			isWorkspace := pp.Tool.UV.Workspace != nil
			switch {
			case p.Dir == "" && managed && (pp.Project != nil || isWorkspace):
				p.Dir, p.Root = dir, dir
				if isWorkspace {
					return withLock(files, p), true, nil
				}
			case p.Dir != "" && isWorkspace:
				p.Root = dir
				return withLock(files, p), true, nil
			}
		}
		if dir == root {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if p.Dir == "" {
		return Project{}, false, nil
	}
	return withLock(files, p), true, nil
}

func withLock(files FileReader, p Project) Project {
	lock := filepath.Join(p.Root, "uv.lock")
	if _, err := files.ReadFile(lock); err == nil {
		p.Lock = lock
	}
	return p
}

func readPyproject(files FileReader, dir string) (pyproject, bool, error) {
	path := filepath.Join(dir, "pyproject.toml")
	data, err := files.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return pyproject{}, false, nil
	}
	if err != nil {
		return pyproject{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	var pp pyproject
	if _, err := toml.Decode(string(data), &pp); err != nil {
		return pyproject{}, false, fmt.Errorf("parse %s: %w", path, err)
	}
	return pp, true, nil
}

// within reports whether path is root or below it (both absolute, clean).
func within(path, root string) bool {
	if path == root {
		return true
	}
	if !strings.HasSuffix(root, string(filepath.Separator)) {
		root += string(filepath.Separator)
	}
	return strings.HasPrefix(path, root)
}

// projectContent returns the bytes that define a project's environment:
// the member's and the workspace root's pyproject.toml and the lock. Source
// files are not included: uv installs the project itself editable, so code
// changes show up without a rebuild, exactly as with `uv run`.
func projectContent(files FileReader, p Project) ([]string, error) {
	var parts []string
	paths := []string{filepath.Join(p.Dir, "pyproject.toml")}
	if p.Root != p.Dir {
		paths = append(paths, filepath.Join(p.Root, "pyproject.toml"))
	}
	paths = append(paths, filepath.Join(p.Root, "uv.lock"))
	for _, f := range paths {
		data, err := files.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			parts = append(parts, f, "<absent>")
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read project file: %w", err)
		}
		parts = append(parts, f, string(data))
	}
	return parts, nil
}

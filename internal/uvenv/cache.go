package uvenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// manifestName is the file inside every published env describing it. Its
// presence is the "this env is complete" marker (it is written last, before
// the atomic rename), and its mtime records the env's last use.
const manifestName = "pyexec-env.json"

// Manifest describes a cached environment.
type Manifest struct {
	Key           string        `json:"key"`
	Strategy      string        `json:"strategy"` // uv-env or uv-project
	BasePython    string        `json:"base_python"`
	PythonVersion string        `json:"python_version"`
	Requirements  []string      `json:"requirements,omitempty"`
	Resolved      []string      `json:"resolved_dependencies"`
	Index         IndexSettings `json:"index"`
	ProjectDir    string        `json:"project_dir,omitempty"`
	ProjectRoot   string        `json:"project_root,omitempty"`
	Created       time.Time     `json:"created"`
	SizeBytes     int64         `json:"size_bytes"`
	UVVersion     string        `json:"uv_version,omitempty"`
	// Sealed: bytecode compiled and the env made read-only (seal.go).
	Sealed bool `json:"sealed"`
	// Confined: built by uv under a Confiner (something had to be built
	// from source): its files were written by that build, and the server
	// never executes them (confine.go).
	Confined bool `json:"confined,omitempty"`
}

// EnvInfo is one cached environment as List reports it.
type EnvInfo struct {
	Manifest
	Dir      string    `json:"dir"`
	LastUsed time.Time `json:"last_used"`
	InUse    bool      `json:"in_use"`
	// Names are the names bound to this env (named.go); a named env is
	// pinned: eviction and Prune leave it alone.
	Names []string `json:"names,omitempty"`
}

// layout names the directories under <state-dir>/envs.
type layout struct{ root string }

func (l layout) env(key string) string      { return filepath.Join(l.root, key) }
func (l layout) manifest(key string) string { return filepath.Join(l.root, key, manifestName) }
func (l layout) lock(key string) string     { return filepath.Join(l.root, ".locks", key+".lock") }
func (l layout) tmp() string                { return filepath.Join(l.root, ".tmp") }

func (l layout) ensure() error {
	for _, d := range []string{l.root, filepath.Join(l.root, ".locks"), l.tmp()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create env cache dir: %w", err)
		}
		// World-traversable: runs may execute as an unprivileged uid and must
		// reach their env's python. Only the envs themselves are read.
		if err := os.Chmod(d, 0o755); err != nil {
			return fmt.Errorf("create env cache dir: %w", err)
		}
	}
	return nil
}

func readManifest(path string) (Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return m, nil
}

// List returns every published environment, least recently used first.
func (m *Manager) List(ctx context.Context) ([]EnvInfo, error) {
	entries, err := os.ReadDir(m.layout.root)
	if err != nil {
		return nil, fmt.Errorf("list envs: %w", err)
	}
	pinned := m.pinnedKeys()
	var out []EnvInfo
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		key := e.Name()
		if strings.HasPrefix(key, ".") || !e.IsDir() {
			continue
		}
		path := m.layout.manifest(key)
		man, err := readManifest(path)
		if err != nil {
			continue // being removed, or not ours
		}
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		out = append(out, EnvInfo{Manifest: man, Dir: m.layout.env(key), LastUsed: fi.ModTime(), InUse: m.inUse(key), Names: pinned[key]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.Before(out[j].LastUsed) })
	return out, nil
}

// inUse reports whether a run (in this or another process) holds the env.
func (m *Manager) inUse(key string) bool {
	if m.refs(key) > 0 {
		return true
	}
	l, err := openLock(m.layout.lock(key))
	if err != nil {
		return false
	}
	defer l.close()
	ok, err := l.tryLock(lockEx)
	return err == nil && !ok
}

// PruneOptions choose which environments Prune removes. Envs in use and
// named envs are never removed, whatever the options say.
type PruneOptions struct {
	All       bool          // remove every env not in use
	UnusedFor time.Duration // remove envs not used for at least this long
	MaxBytes  int64         // then evict least recently used until the total fits
}

// PruneResult says what Prune did.
type PruneResult struct {
	Removed    []EnvInfo `json:"removed"`
	FreedBytes int64     `json:"freed_bytes"`
	Kept       int       `json:"kept"`
	KeptBytes  int64     `json:"kept_bytes"`
}

// Prune removes environments by age, entirely, or down to a size, least
// recently used first, and cleans leftovers of interrupted builds.
func (m *Manager) Prune(ctx context.Context, opts PruneOptions) (PruneResult, error) {
	return m.prune(ctx, opts, "")
}

// prune does Prune's work; skip names an env that must survive (the one
// just built, not yet handed to its caller).
func (m *Manager) prune(ctx context.Context, opts PruneOptions, skip string) (PruneResult, error) {
	m.cleanTmp()
	envs, err := m.List(ctx)
	if err != nil {
		return PruneResult{}, err
	}
	var res PruneResult
	var total int64
	for _, e := range envs {
		total += e.SizeBytes
	}
	now := m.now()
	for _, e := range envs { // least recently used first
		if err := ctx.Err(); err != nil {
			return res, err
		}
		want := opts.All ||
			(opts.UnusedFor > 0 && now.Sub(e.LastUsed) >= opts.UnusedFor) ||
			(opts.MaxBytes > 0 && total > opts.MaxBytes)
		if !want || e.Key == skip || e.InUse || len(e.Names) > 0 {
			res.Kept++
			res.KeptBytes += e.SizeBytes
			continue
		}
		removed, err := m.remove(e.Key)
		if err != nil {
			return res, err
		}
		if !removed { // became in use meanwhile
			res.Kept++
			res.KeptBytes += e.SizeBytes
			continue
		}
		total -= e.SizeBytes
		res.Removed = append(res.Removed, e)
		res.FreedBytes += e.SizeBytes
	}
	return res, nil
}

// remove deletes one env unless someone holds it. Under the exclusive lock
// the env is renamed into .tmp (atomic: a concurrent Ensure sees either the
// whole env or none), then deleted at leisure.
func (m *Manager) remove(key string) (bool, error) {
	if m.refs(key) > 0 {
		return false, nil
	}
	l, err := openLock(m.layout.lock(key))
	if err != nil {
		return false, err
	}
	defer l.close()
	ok, err := l.tryLock(lockEx)
	if err != nil || !ok {
		return false, err
	}
	dir := m.layout.env(key)
	trash, err := os.MkdirTemp(m.layout.tmp(), "trash-")
	if err != nil {
		return false, fmt.Errorf("evict env %s: %w", key, err)
	}
	// Renaming a directory into another parent needs write permission on it
	// (its ".." changes), and the env root is read-only.
	if err := os.Chmod(dir, 0o755); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("evict env %s: %w", key, err)
	}
	if err := os.Rename(dir, filepath.Join(trash, key)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			os.Remove(trash)
			return false, nil
		}
		return false, fmt.Errorf("evict env %s: %w", key, err)
	}
	l.unlock()
	if err := removeAll(trash); err != nil {
		return true, fmt.Errorf("evict env %s: delete: %w", key, err)
	}
	return true, nil
}

// cleanTmp deletes leftovers in .tmp: trash from evictions and build dirs
// of builds that are no longer running (their key's lock is free).
func (m *Manager) cleanTmp() {
	entries, err := os.ReadDir(m.layout.tmp())
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(m.layout.tmp(), e.Name())
		if strings.HasPrefix(e.Name(), "trash-") {
			removeAll(path)
			continue
		}
		key, _, ok := strings.Cut(e.Name(), "-")
		if !ok {
			continue
		}
		l, err := openLock(m.layout.lock(key))
		if err != nil {
			continue
		}
		if got, _ := l.tryLock(lockEx); got {
			removeAll(path)
		}
		l.close()
	}
}

// removeAll deletes a tree that may contain read-only directories (which a
// non-root owner cannot delete entries from until they are writable again).
func removeAll(path string) error {
	filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(path)
}

// makeReadOnly strips write permission everywhere below dir (not dir itself:
// it still has to be renamed into place) and makes everything readable, and
// directories and executables traversable/executable, by all users.
func makeReadOnly(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode().Perm()
		if d.IsDir() {
			mode = 0o555
		} else {
			mode = mode&^0o222 | 0o444
			if mode&0o100 != 0 {
				mode |= 0o111
			}
		}
		return os.Chmod(p, mode)
	})
}

// dirSize sums the sizes of the regular files below dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

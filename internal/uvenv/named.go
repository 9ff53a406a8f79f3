package uvenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Named environments: a name bound to a Spec, kept under
// <envs>/.names/<name>.json. The env itself is an ordinary cached env (same
// key, same build, same sealing); the name pins it, so LRU eviction and
// Prune never remove it, and runs reach it by name (Spec is re-planned from
// the record, so a named env that was removed by hand is rebuilt on its next
// use rather than lost). Only DeleteNamed unpins and removes it.
//
// Why records and not a flag in the manifest: a manifest belongs to an env
// key and is written once at build time, while names come and go; several
// names may share one env (same interpreter and requirements), and a record
// survives the env being rebuilt under the same key.

// NamedEnv is the record of one named environment.
type NamedEnv struct {
	Name          string        `json:"name" jsonschema:"The environment's name: runs use it with env: NAME."`
	Key           string        `json:"key" jsonschema:"Cache key of the environment it names."`
	Python        string        `json:"python" jsonschema:"Base interpreter the environment was built on."`
	PythonVersion string        `json:"python_version" jsonschema:"Version of that interpreter."`
	Requirements  []string      `json:"requirements" jsonschema:"Requirements (PEP 508) it was created with, normalized."`
	Index         IndexSettings `json:"index,omitzero" jsonschema:"Index settings it was built with, besides the server's."`
	Created       time.Time     `json:"created" jsonschema:"When it was created."`
	// Tool marks an environment pyexec made for its own tools (ruff);
	// users see it, may delete it, and it is made again when needed.
	Tool string `json:"tool,omitempty" jsonschema:"Set on environments pyexec keeps for its own tools (e.g. ruff); deleting one only means it is reinstalled at next use."`
}

// spec is the Spec the record was created from.
func (n NamedEnv) spec() Spec {
	return Spec{Python: n.Python, PythonVersion: n.PythonVersion, Requirements: n.Requirements, Index: n.Index}
}

// Name limits: a name is a file name and a word a model types.
const maxNameLen = 64

var envNamePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// ErrNoNamedEnv is returned for a name no environment has.
var ErrNoNamedEnv = errors.New("no environment has this name")

// CheckName validates an environment name (letters, digits, _ . -, at most
// 64 characters, not starting with . or -).
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("give a name (letters, digits, _ . -)")
	case len(name) > maxNameLen:
		return fmt.Errorf("%q is %d characters; the limit is %d", name, len(name), maxNameLen)
	case !envNamePattern.MatchString(name):
		return fmt.Errorf("%q may only hold letters, digits, _ . - and must not start with . or -", name)
	}
	return nil
}

func (l layout) names() string               { return filepath.Join(l.root, ".names") }
func (l layout) name(name string) string     { return filepath.Join(l.names(), name+".json") }
func (l layout) namesLock() string           { return filepath.Join(l.root, ".locks", ".names.lock") }
func (m *Manager) namedPath(n string) string { return m.layout.name(n) }

// CreateNamed builds (or finds) the environment for spec and names it. An
// existing name is only rebound when replace is set; the env it named before
// stays in the cache, unpinned, for LRU to handle.
func (m *Manager) CreateNamed(ctx context.Context, name string, spec Spec, replace bool, tool string, progress Progress) (NamedEnv, Env, error) {
	if err := CheckName(name); err != nil {
		return NamedEnv{}, Env{}, fmt.Errorf("name: %w", err)
	}
	if len(spec.Requirements) == 0 {
		return NamedEnv{}, Env{}, errors.New("dependencies: a named environment needs at least one requirement")
	}
	if !replace {
		if old, err := m.Named(name); err == nil {
			return NamedEnv{}, Env{}, fmt.Errorf("name: an environment named %q already exists (requirements %s); delete it first or choose another name", name, strings.Join(old.Requirements, ", "))
		}
	}
	env, release, err := m.Ensure(ctx, spec, progress)
	if err != nil {
		return NamedEnv{}, Env{}, err
	}
	defer release()
	rec := NamedEnv{Name: name, Key: env.Key, Python: spec.Python, PythonVersion: env.PythonVersion,
		Requirements: env.Requirements, Index: spec.Index, Created: m.now().UTC(), Tool: tool}
	if err := m.writeNamed(ctx, rec); err != nil {
		return NamedEnv{}, Env{}, err
	}
	return rec, env, nil
}

// writeNamed stores a record atomically under the names lock.
func (m *Manager) writeNamed(ctx context.Context, rec NamedEnv) error {
	unlock, err := m.lockNames(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.MkdirAll(m.layout.names(), 0o755); err != nil {
		return fmt.Errorf("named environments: %w", err)
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("named environment %s: %w", rec.Name, err)
	}
	tmp, err := os.CreateTemp(m.layout.names(), ".tmp-*")
	if err != nil {
		return fmt.Errorf("named environment %s: %w", rec.Name, err)
	}
	_, werr := tmp.Write(append(data, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Rename(tmp.Name(), m.namedPath(rec.Name))); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("named environment %s: %w", rec.Name, err)
	}
	return nil
}

func (m *Manager) lockNames(ctx context.Context) (func(), error) {
	l, err := openLock(m.layout.namesLock())
	if err != nil {
		return nil, err
	}
	if err := l.lock(ctx, lockEx); err != nil {
		l.close()
		return nil, fmt.Errorf("named environments: %w", err)
	}
	return func() { l.close() }, nil
}

// Named reads one record.
func (m *Manager) Named(name string) (NamedEnv, error) {
	if err := CheckName(name); err != nil {
		return NamedEnv{}, fmt.Errorf("env: %w", err)
	}
	data, err := os.ReadFile(m.namedPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return NamedEnv{}, fmt.Errorf("env %q: %w", name, ErrNoNamedEnv)
	}
	if err != nil {
		return NamedEnv{}, fmt.Errorf("env %q: %w", name, err)
	}
	var rec NamedEnv
	if err := json.Unmarshal(data, &rec); err != nil {
		return NamedEnv{}, fmt.Errorf("env %q: %w", name, err)
	}
	return rec, nil
}

// NamedEnvs lists every record, by name.
func (m *Manager) NamedEnvs() ([]NamedEnv, error) {
	entries, err := os.ReadDir(m.layout.names())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("named environments: %w", err)
	}
	var out []NamedEnv
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(name, ".") {
			continue
		}
		if rec, err := m.Named(name); err == nil {
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// EnsureNamed is Ensure for a named environment: the env its record names,
// rebuilt when it is missing. Release it when the run has ended.
func (m *Manager) EnsureNamed(ctx context.Context, name string, progress Progress) (Env, func(), error) {
	rec, err := m.Named(name)
	if err != nil {
		return Env{}, nil, err
	}
	env, release, err := m.Ensure(ctx, rec.spec(), progress)
	if err != nil {
		return Env{}, nil, fmt.Errorf("env %q: %w", name, err)
	}
	if env.Key != rec.Key { // the server's index settings changed: follow them
		rec.Key = env.Key
		_ = m.writeNamed(ctx, rec)
	}
	return env, release, nil
}

// DeleteResult says what DeleteNamed did.
type DeleteResult struct {
	Name string `json:"name" jsonschema:"The name that was deleted."`
	// Removed: the environment's files were deleted too. They are kept
	// when another name uses them or a run holds them (then LRU eviction
	// removes them later).
	Removed    bool   `json:"removed" jsonschema:"True when the environment's files were deleted too."`
	FreedBytes int64  `json:"freed_bytes" jsonschema:"Bytes freed on disk."`
	Note       string `json:"note,omitempty" jsonschema:"Why the files were kept, when they were."`
}

// DeleteNamed removes a name and, unless another name or a running run
// still uses it, its environment.
func (m *Manager) DeleteNamed(ctx context.Context, name string) (DeleteResult, error) {
	rec, err := m.Named(name)
	if err != nil {
		return DeleteResult{}, err
	}
	unlock, err := m.lockNames(ctx)
	if err != nil {
		return DeleteResult{}, err
	}
	err = os.Remove(m.namedPath(name))
	unlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return DeleteResult{}, fmt.Errorf("env %q: %w", name, err)
	}
	res := DeleteResult{Name: name}
	if others := m.namesOf(rec.Key); len(others) > 0 {
		res.Note = fmt.Sprintf("its files are kept: the environment is also named %s", strings.Join(others, ", "))
		return res, nil
	}
	var size int64
	if man, err := readManifest(m.layout.manifest(rec.Key)); err == nil {
		size = man.SizeBytes
	}
	removed, err := m.remove(rec.Key)
	// A run that has just ended gives its env back a moment after its
	// result is out, and a new env is being sealed (bytecode compiled, under
	// a shared lock) for a while after its build: wait for those before
	// keeping the files.
	for wait := 0; err == nil && !removed && m.exists(rec.Key) && (wait < 40 || (m.isSealing(rec.Key) && wait < 1200)); wait++ {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		removed, err = m.remove(rec.Key)
	}
	if err != nil {
		return res, err
	}
	if !removed {
		if _, err := os.Stat(m.layout.env(rec.Key)); err == nil {
			res.Note = "its files are kept until the runs using it end; LRU eviction removes them afterwards"
		}
		return res, nil
	}
	res.Removed, res.FreedBytes = true, size
	return res, nil
}

func (m *Manager) isSealing(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sealing[key]
}

func (m *Manager) exists(key string) bool {
	_, err := os.Stat(m.layout.env(key))
	return err == nil
}

// namesOf lists the names bound to key.
func (m *Manager) namesOf(key string) []string {
	recs, _ := m.NamedEnvs()
	var out []string
	for _, r := range recs {
		if r.Key == key {
			out = append(out, r.Name)
		}
	}
	return out
}

// pinnedKeys is the set of env keys a name pins (eviction skips them).
func (m *Manager) pinnedKeys() map[string][]string {
	recs, _ := m.NamedEnvs()
	out := map[string][]string{}
	for _, r := range recs {
		out[r.Key] = append(out[r.Key], r.Name)
	}
	return out
}

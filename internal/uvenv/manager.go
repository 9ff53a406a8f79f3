package uvenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Strategies an Env reports as the run's execution_strategy.
const (
	StrategyEnv     = "uv-env"     // requirements (explicit and/or PEP 723) in a cached venv
	StrategyProject = "uv-project" // a pyproject.toml project synced like `uv run` would
)

// DefaultMaxBytes is the default size cap of the environment cache.
const DefaultMaxBytes int64 = 5 << 30

// Project sync modes (Config.ProjectSync). The default mirrors plain
// `uv run`: sync from uv.lock, re-locking (and so rewriting uv.lock) when
// pyproject.toml changed since the lock was made.
const (
	SyncDefault = ""       // like `uv run`: update the lock if outdated
	SyncLocked  = "locked" // like `uv run --locked`: fail if uv.lock is outdated
	SyncFrozen  = "frozen" // like `uv run --frozen`: install the lock as is, never check it
)

// Config configures a Manager.
type Config struct {
	// StateDir is pyexec's state directory; envs live in StateDir/envs and
	// uv's cache in StateDir/uv-cache (unless UV_CACHE_DIR is set).
	StateDir string
	// UV is the uv binary. Empty: FindUV(Environ). A missing uv only fails
	// builds (with ErrNoUV); cache hits never run uv.
	UV string
	// Environ is the environment uv runs with and the source of the UV_*
	// settings that go into cache keys. Nil means os.Environ().
	Environ []string
	// Index are server-wide index settings; a Spec's settings add to them.
	Index IndexSettings
	// MaxBytes caps the total size of cached envs (least recently used are
	// evicted after each build). 0 means DefaultMaxBytes; negative, no cap.
	MaxBytes int64
	// ProjectSync is SyncDefault, SyncLocked or SyncFrozen.
	ProjectSync string
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Confine is the Confiner of builds whose Spec gives none (a named
	// environment rebuilt on demand); nil refuses them.
	Confine Confiner
}

// Spec is what a run needs: an interpreter plus requirements, a project, or
// both (a project plus extra requirements, like `uv run --with`).
type Spec struct {
	// Python is the real path of the base interpreter (never a shim).
	Python string
	// PythonVersion is its version ("3.11.7"); probed (once) when empty.
	PythonVersion string
	// Requirements are PEP 508 requirements: explicit dependencies plus a
	// PEP 723 block's.
	Requirements []string
	// ProjectDir, when set, is a directory with a pyproject.toml (see
	// FindProject); the env is that project's, synced with uv.
	ProjectDir string
	// WorkspaceRoot bounds the search for a uv workspace root above
	// ProjectDir; empty means ProjectDir itself.
	WorkspaceRoot string
	// RequiresPython (PEP 723 requires-python) is checked against the
	// interpreter before anything is built.
	RequiresPython string
	// Index adds to Config.Index for this environment.
	Index IndexSettings
	// Files reads the project's files (nil: race-free below WorkspaceRoot
	// with the server's rights). Not part of the key.
	Files FileReader
	// Confine runs the uv commands of a build that executes package code
	// (projects, sdists, local and VCS requirements) in the request's
	// sandbox; nil refuses such builds. Not part of the key.
	Confine Confiner
}

// Env is a ready environment. It stays valid (never evicted) until the
// release function returned with it is called.
type Env struct {
	Key           string
	Dir           string
	Python        string // Dir/bin/python: exec this (confined: it may be a build's)
	BasePython    string // the trusted interpreter the env was made from
	Strategy      string // StrategyEnv or StrategyProject
	PythonVersion string
	Requirements  []string
	Resolved      []string // name==version of everything installed
	ProjectDir    string
	// Built is true when this call built the env (a cache miss).
	Built bool
}

// Manager owns the environment cache of one state directory. It is safe for
// concurrent use, and several processes may share one state directory.
type Manager struct {
	cfg      Config
	layout   layout
	uv       uvRunner
	uvErr    error
	uvCache  string
	maxBytes int64
	now      func() time.Time

	mu       sync.Mutex
	flights  map[string]*flight // in-process singleflight, by key
	refcount map[string]int     // refcounts of envs handed out
	versions map[string]pyVersion

	builds atomic.Int64 // number of builds run (tests count them)

	sealing    map[string]bool // envs being sealed in the background, by key
	bg         sync.WaitGroup  // background sealing
	sealErrors atomic.Int64    // seals that failed (the env still works, unsealed)
}

type pyVersion struct {
	modTime time.Time
	size    int64
	version string
}

// New prepares the cache directories and finds uv (not finding it is not an
// error here: envs already built keep working without uv).
func New(cfg Config) (*Manager, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("uvenv: Config.StateDir is required")
	}
	state, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("uvenv: state dir: %w", err)
	}
	switch cfg.ProjectSync {
	case SyncDefault, SyncLocked, SyncFrozen:
	default:
		return nil, fmt.Errorf("uvenv: ProjectSync %q: want %q, %q or %q", cfg.ProjectSync, SyncDefault, SyncLocked, SyncFrozen)
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ()
	}
	m := &Manager{
		cfg:      cfg,
		layout:   layout{root: filepath.Join(state, "envs")},
		maxBytes: cfg.MaxBytes,
		now:      cfg.Now,
		flights:  map[string]*flight{},
		refcount: map[string]int{},
		sealing:  map[string]bool{},
		versions: map[string]pyVersion{},
	}
	if m.maxBytes == 0 {
		m.maxBytes = DefaultMaxBytes
	}
	if m.now == nil {
		m.now = time.Now
	}
	if err := m.layout.ensure(); err != nil {
		return nil, fmt.Errorf("uvenv: %w", err)
	}
	uvPath := cfg.UV
	if uvPath == "" {
		uvPath, m.uvErr = FindUV(cfg.Environ)
	}
	env, cacheDir := uvEnviron(cfg.Environ, state)
	if cacheDir != "" {
		if err := os.MkdirAll(cacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("uvenv: uv cache dir: %w", err)
		}
	}
	m.uv = uvRunner{path: uvPath, environ: env}
	return m, nil
}

// uvEnviron is the environment uv runs with: the given one without anything
// that would redirect uv to another environment, with interpreter downloads
// off and the cache under the state dir (readable by the unprivileged users
// runs may execute as, unlike root's ~/.cache) unless the caller chose them.
func uvEnviron(environ []string, state string) ([]string, string) {
	var out []string
	has := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "CONDA_PREFIX", "PYTHONHOME", "PYTHONPATH":
			continue
		}
		has[name] = true
		out = append(out, kv)
	}
	cacheDir := ""
	if !has["UV_CACHE_DIR"] {
		cacheDir = filepath.Join(state, "uv-cache")
		out = append(out, "UV_CACHE_DIR="+cacheDir)
	}
	if !has["UV_PYTHON_DOWNLOADS"] {
		out = append(out, "UV_PYTHON_DOWNLOADS=never")
	}
	out = append(out, "NO_COLOR=1", "UV_NO_PROGRESS=1")
	return out, cacheDir
}

// UVPath is the uv binary builds use, or "" with the reason when none was found.
func (m *Manager) UVPath() (string, error) { return m.uv.path, m.uvErr }

// plan is a Spec made concrete: normalized, versioned, keyed.
type plan struct {
	spec          Spec
	key           string
	strategy      string
	python        string
	pythonVersion string
	requirements  []string
	index         IndexSettings
	project       Project
}

func (m *Manager) plan(ctx context.Context, spec Spec) (plan, error) {
	if spec.Python == "" {
		return plan{}, errors.New("environment: no base interpreter given")
	}
	reqs, err := NormalizeRequirements(spec.Requirements)
	if err != nil {
		return plan{}, fmt.Errorf("dependencies: %w", err)
	}
	p := plan{spec: spec, python: spec.Python, pythonVersion: spec.PythonVersion, requirements: reqs,
		index: m.cfg.Index.merge(spec.Index), strategy: StrategyEnv}
	if p.pythonVersion == "" {
		if p.pythonVersion, err = m.pythonVersion(ctx, spec.Python); err != nil {
			return plan{}, err
		}
	}
	if spec.RequiresPython != "" {
		ok, err := SatisfiesPython(p.pythonVersion, spec.RequiresPython)
		if err != nil {
			return plan{}, err
		}
		if !ok {
			return plan{}, fmt.Errorf("requires-python %q is not satisfied by Python %s (%s): ask for a matching python_version", spec.RequiresPython, p.pythonVersion, spec.Python)
		}
	}
	parts := []string{"python", p.python, p.pythonVersion, "requirements", strings.Join(reqs, "\n")}
	if spec.ProjectDir != "" {
		root := spec.WorkspaceRoot
		if root == "" {
			root = spec.ProjectDir
		}
		files := spec.Files
		if files == nil {
			if files, err = defaultFiles(root); err != nil {
				return plan{}, err
			}
		}
		proj, ok, err := DetectProject(files, spec.ProjectDir, root)
		if err != nil {
			return plan{}, err
		}
		if !ok {
			return plan{}, fmt.Errorf("project %s: no pyproject.toml with a [project] table", spec.ProjectDir)
		}
		content, err := projectContent(files, proj)
		if err != nil {
			return plan{}, err
		}
		p.project, p.strategy = proj, StrategyProject
		parts = append(parts, "project", proj.Dir, proj.Root, "sync", m.cfg.ProjectSync)
		parts = append(parts, content...)
	} else if len(reqs) == 0 {
		return plan{}, errors.New("environment: nothing to install (no requirements and no project)")
	}
	parts = append(parts, indexKeyParts(p.index, m.cfg.Environ)...)
	p.key = contentKey(append([]string{p.strategy}, parts...)...)
	return p, nil
}

// pythonVersion asks the interpreter for its version once per binary (a
// changed file, e.g. an upgraded interpreter, is asked again).
func (m *Manager) pythonVersion(ctx context.Context, python string) (string, error) {
	fi, err := os.Stat(python)
	if err != nil {
		return "", fmt.Errorf("python %s: %w", python, err)
	}
	m.mu.Lock()
	v, ok := m.versions[python]
	m.mu.Unlock()
	if ok && v.modTime.Equal(fi.ModTime()) && v.size == fi.Size() {
		return v.version, nil
	}
	out, err := exec.CommandContext(ctx, python, "-I", "-S", "-c",
		"import sys; print('%d.%d.%d' % sys.version_info[:3])").Output()
	if err != nil {
		return "", fmt.Errorf("python %s: ask its version: %w", python, err)
	}
	version := strings.TrimSpace(string(out))
	m.mu.Lock()
	m.versions[python] = pyVersion{modTime: fi.ModTime(), size: fi.Size(), version: version}
	m.mu.Unlock()
	return version, nil
}

// errMiss says the env is not (or no longer) published.
var errMiss = errors.New("env not built")

// Ensure returns a ready environment for spec, building it with uv on a
// cache miss, and a release function the caller must call when its run has
// ended (until then the env cannot be evicted). progress, which may be nil,
// hears the phases of a build; a cache hit reports nothing and runs no uv.
func (m *Manager) Ensure(ctx context.Context, spec Spec, progress Progress) (Env, func(), error) {
	p, err := m.plan(ctx, spec)
	if err != nil {
		return Env{}, nil, err
	}
	built := false
	for attempt := 0; ; attempt++ {
		env, release, err := m.acquire(p)
		if err == nil {
			env.Built = built
			return env, release, nil
		}
		if !errors.Is(err, errMiss) {
			return Env{}, nil, err
		}
		if attempt == 3 {
			return Env{}, nil, fmt.Errorf("environment %s: evicted as soon as built, 3 times: raise the cache size cap", p.key)
		}
		key, err := m.buildShared(ctx, p, progress)
		if err != nil {
			return Env{}, nil, err
		}
		p.key, built = key, true
	}
}

// acquire is the cache-hit path: a shared lock (so no process evicts the
// env while it is used), the manifest, a stat of the env's python, and a
// last-use stamp. No uv, no subprocess.
func (m *Manager) acquire(p plan) (Env, func(), error) {
	l, err := openLock(m.layout.lock(p.key))
	if err != nil {
		return Env{}, nil, err
	}
	ok, err := l.tryLock(lockSh)
	if err != nil || !ok { // building or being evicted: join the build path
		l.close()
		if err != nil {
			return Env{}, nil, err
		}
		return Env{}, nil, errMiss
	}
	manifestPath := m.layout.manifest(p.key)
	man, err := readManifest(manifestPath)
	if err != nil {
		l.close()
		if errors.Is(err, fs.ErrNotExist) {
			return Env{}, nil, errMiss
		}
		return Env{}, nil, fmt.Errorf("environment %s: %w", p.key, err)
	}
	dir := m.layout.env(p.key)
	python := VenvPython(dir)
	if _, err := os.Stat(python); err != nil {
		l.close()
		return Env{}, nil, fmt.Errorf("environment %s is broken (its python is gone; was the base interpreter %s removed?): %w", p.key, man.BasePython, err)
	}
	if !man.Sealed {
		m.sealLater(p.key) // a seal interrupted by a restart, or built by an older pyexec
	}
	now := m.now()
	os.Chtimes(manifestPath, now, now) // last use, for LRU eviction; best effort
	m.mu.Lock()
	m.refcount[p.key]++
	m.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			m.mu.Lock()
			if m.refcount[p.key]--; m.refcount[p.key] <= 0 {
				delete(m.refcount, p.key)
			}
			m.mu.Unlock()
			l.close()
		})
	}
	return Env{Key: p.key, Dir: dir, Python: python, BasePython: man.BasePython, Strategy: man.Strategy,
		PythonVersion: man.PythonVersion, Requirements: man.Requirements,
		Resolved: man.Resolved, ProjectDir: man.ProjectDir}, release, nil
}

func (m *Manager) refs(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refcount[key]
}

// flight is one in-process build that concurrent Ensure calls for the same
// key share; each waiter's progress callback hears the build too.
type flight struct {
	done chan struct{}
	key  string // where the env was published
	err  error

	mu   sync.Mutex
	subs []Progress
}

func (f *flight) progress(phase, detail string) {
	f.mu.Lock()
	subs := append([]Progress(nil), f.subs...)
	f.mu.Unlock()
	for _, s := range subs {
		s(phase, detail)
	}
}

// buildShared builds p's env, or waits for the build already running in
// this process. A waiter whose own ctx is still live retries when the build
// it joined was cancelled by its leader's ctx.
func (m *Manager) buildShared(ctx context.Context, p plan, progress Progress) (string, error) {
	for {
		m.mu.Lock()
		f, running := m.flights[p.key]
		if !running {
			f = &flight{done: make(chan struct{})}
			m.flights[p.key] = f
		}
		if progress != nil {
			f.mu.Lock()
			f.subs = append(f.subs, progress)
			f.mu.Unlock()
		}
		m.mu.Unlock()

		if !running {
			f.key, f.err = m.build(ctx, p, f.progress)
			m.mu.Lock()
			delete(m.flights, p.key)
			m.mu.Unlock()
			close(f.done)
			return f.key, f.err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("wait for environment build: %w", ctx.Err())
		case <-f.done:
		}
		if f.err != nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) && ctx.Err() == nil {
			continue
		}
		return f.key, f.err
	}
}

// Builds is the number of environment builds this Manager has run (cache
// misses that reached uv); useful for metrics and for tests proving reuse.
func (m *Manager) Builds() int64 { return m.builds.Load() }

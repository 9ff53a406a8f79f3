package engine

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Discovery of the installed interpreters.
//
// The list is made from cheap sources first: python3 and python3.X on PATH
// (pyenv shims followed without being executed, or skipped), pyenv's
// versions, /usr/bin and /usr/local/bin, and the paths uv reported last
// time; each candidate is probed in parallel, mostly from the probe cache
// (interpcache.go). `uv python list` is slow (it starts every interpreter
// on PATH it has not seen, pyenv shims included: 1.4 s here), so it never
// runs on a request's path: it runs in the background once the first list
// is out and something has read it (a server nobody asks never starts it),
// and again whenever the list is older than refreshEvery, and what
// it adds is published when it is done. Servers start discovery when they
// start (Engine.DiscoverInterpreters), so the first request that needs the
// list usually finds it made.
type discovery struct {
	mu      sync.Mutex
	list    []Interpreter
	at      time.Time     // when list was published
	withUV  bool          // list includes an answer from uv (fresh or cached)
	first   chan struct{} // closed once the first list is published
	uvDone  chan struct{} // closed when the background uv pass under way ends
	started bool
	busy    bool // a background pass is under way
	closed  bool

	quit chan struct{}
	bg   sync.WaitGroup

	// wantUV is closed by the first reader of the list: a server's first
	// pass asks uv only then, so servers nobody asks (and test servers by
	// the hundred) never pay uv's start of every interpreter it knows.
	wantUV     chan struct{}
	wantUVOnce sync.Once
}

const (
	// refreshEvery is how old the list may get before a request that reads
	// it starts a refresh in the background (it reads the old one meanwhile).
	refreshEvery = 5 * time.Minute
	// uvMaxAge is how long uv's answer stays good enough to skip asking uv
	// again at a server's start.
	uvMaxAge = time.Hour
)

func (d *discovery) init() {
	if d.first == nil {
		d.first = make(chan struct{})
		d.quit = make(chan struct{})
		d.wantUV = make(chan struct{})
	}
}

// DiscoverInterpreters starts finding the installed interpreters in the
// background, so that the first request needing them (server_info, a
// python_version) finds the list made. Servers call it once at start.
func (e *Engine) DiscoverInterpreters() { e.interps.start() }

// start begins the first discovery unless it has begun.
func (in *interpreters) start() {
	d := &in.disc
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	if d.started || d.closed {
		return
	}
	d.started, d.busy = true, true
	d.uvDone = make(chan struct{})
	d.bg.Add(1)
	go in.pass(true)
}

// All lists every interpreter this machine offers, newest first, without
// duplicates. The first call waits for the first list (cheap sources);
// later ones return the current list at once, refreshing it in the
// background when it is old. Nothing is ever downloaded.
func (in *interpreters) All(ctx context.Context) []Interpreter {
	in.start()
	d := &in.disc
	d.wantUVOnce.Do(func() { close(d.wantUV) })
	select {
	case <-d.first:
	case <-ctx.Done():
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.busy && !d.closed && time.Since(d.at) > refreshEvery {
		d.busy = true
		d.uvDone = make(chan struct{})
		d.bg.Add(1)
		go in.pass(false)
	}
	return d.list
}

// complete is All once uv's answer is in: for a request that found no
// match in the cheap sources' list while uv's pass is still under way.
func (in *interpreters) complete(ctx context.Context) []Interpreter {
	list := in.All(ctx)
	d := &in.disc
	d.mu.Lock()
	wait, withUV := d.uvDone, d.withUV
	d.mu.Unlock()
	if withUV || wait == nil {
		return list
	}
	select {
	case <-wait:
	case <-ctx.Done():
		return list
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.list
}

// pass makes a list: from the cheap sources (published at once on the
// first pass), then with uv's answer (asked unless the first pass has a
// recent one cached).
func (in *interpreters) pass(first bool) {
	d := &in.disc
	defer d.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-d.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	uvPaths, haveUV := in.cache.uvList()
	if first {
		in.publish(in.discover(ctx, uvPaths.Paths), haveUV)
		_ = in.cache.save() // what was probed, even if this process ends before uv does
		if haveUV && time.Since(uvPaths.At) < uvMaxAge {
			in.finishPass(nil, false)
			return
		}
		select {
		case <-d.wantUV:
		case <-d.quit:
			in.finishPass(nil, false)
			return
		}
	}
	paths, ok := uvInterpreters(ctx)
	if ctx.Err() != nil {
		in.finishPass(nil, false) // closing: nothing more to publish
		return
	}
	if ok {
		in.cache.setUVList(paths, time.Now())
	} else {
		paths = uvPaths.Paths
	}
	in.finishPass(in.discover(ctx, paths), ok || haveUV)
}

func (in *interpreters) publish(list []Interpreter, withUV bool) {
	d := &in.disc
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list, d.at, d.withUV = list, time.Now(), withUV
	select {
	case <-d.first:
	default:
		close(d.first)
	}
}

// finishPass publishes list (unless nil) and ends the background pass.
func (in *interpreters) finishPass(list []Interpreter, withUV bool) {
	if list != nil {
		in.publish(list, withUV)
	}
	_ = in.cache.save()
	d := &in.disc
	d.mu.Lock()
	d.busy = false
	close(d.uvDone)
	d.mu.Unlock()
}

// closeDiscovery stops a background pass (its uv is killed) and waits.
func (in *interpreters) closeDiscovery() {
	d := &in.disc
	d.mu.Lock()
	d.init()
	if !d.closed {
		d.closed = true
		close(d.quit)
	}
	d.mu.Unlock()
	d.bg.Wait()
}

// discover probes every candidate (in parallel) and orders what works.
func (in *interpreters) discover(ctx context.Context, uvPaths []string) []Interpreter {
	type candidate struct{ path, source string }
	var cands []candidate
	for _, name := range pythonNames() {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if root, ok := pyenvShim(p); ok {
			// pyenv's versions are listed below; a shim is only worth its
			// target when it has one without being executed.
			if p = pyenvTarget(p, root, os.Getenv, in.cwd, in.runWritable); p == "" {
				continue
			}
		}
		cands = append(cands, candidate{p, "PATH"})
	}
	pyenvRoot := os.Getenv("PYENV_ROOT")
	if pyenvRoot == "" {
		if home, err := os.UserHomeDir(); err == nil {
			pyenvRoot = filepath.Join(home, ".pyenv")
		}
	}
	if pyenvRoot != "" {
		matches, _ := filepath.Glob(filepath.Join(pyenvRoot, "versions", "*", "bin", "python3"))
		for _, m := range matches {
			cands = append(cands, candidate{m, "pyenv"})
		}
	}
	for _, dir := range []string{"/usr/bin", "/usr/local/bin"} {
		matches, _ := filepath.Glob(filepath.Join(dir, "python3.*"))
		for _, m := range matches {
			if isVersionedPython(filepath.Base(m)) {
				cands = append(cands, candidate{m, "system"})
			}
		}
	}
	for _, p := range uvPaths {
		if _, shim := pyenvShim(p); !shim {
			cands = append(cands, candidate{p, "uv"})
		}
	}

	results := make([]Interpreter, len(cands))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if it, err := in.probe(ctx, c.path); err == nil {
				it.Source = c.source
				results[i] = it
			}
		}()
	}
	wg.Wait()

	seen := make(map[string]bool)
	out := []Interpreter{}
	for _, it := range results {
		if it.Path == "" {
			continue
		}
		key := it.Path
		if real, err := filepath.EvalSymlinks(it.Path); err == nil {
			key = real
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, it)
	}
	slices.SortStableFunc(out, func(a, b Interpreter) int { return compareVersions(b.Version, a.Version) })
	return out
}

func pythonNames() []string {
	names := []string{defaultPythonName}
	for minor := 20; minor >= 6; minor-- {
		names = append(names, "python3."+strconv.Itoa(minor))
	}
	return names
}

func isVersionedPython(base string) bool {
	rest, ok := strings.CutPrefix(base, "python3.")
	if !ok || rest == "" {
		return false
	}
	_, err := strconv.Atoi(rest)
	return err == nil
}

// uvInterpreters asks uv for the interpreters it has found (installed
// only); ok is false when uv is missing or failed.
func uvInterpreters(ctx context.Context) (paths []string, ok bool) {
	uv, err := exec.LookPath("uv")
	if err != nil {
		return nil, false
	}
	if root, shim := pyenvShim(uv); shim {
		if uv = pyenvTarget(uv, root, os.Getenv, "", nil); uv == "" {
			return nil, false
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, uv, "python", "list", "--only-installed", "--output-format", "json")
	// From /, and without an active environment: uv also reports the
	// environment of the current directory, which could be a workspace's.
	cmd.Dir = "/"
	for _, kv := range os.Environ() {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "VIRTUAL_ENV", "CONDA_PREFIX", "UV_PYTHON", "UV_PROJECT_ENVIRONMENT":
		case "PATH":
			// Without pyenv's shim directories: uv would start every shim
			// (each a bash pyenv run, failing for the versions not
			// selected), and pyenv's versions are listed from its root.
			cmd.Env = append(cmd.Env, "PATH="+withoutShimDirs(v))
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "UV_PYTHON_DOWNLOADS=never", "UV_OFFLINE=1")
	out, err := cmd.Output()
	if err != nil {
		return nil, false
	}
	var entries []struct {
		Path *string `json:"path"`
	}
	if json.Unmarshal(out, &entries) != nil {
		return nil, false
	}
	paths = []string{}
	for _, e := range entries {
		if e.Path != nil && *e.Path != "" {
			paths = append(paths, *e.Path)
		}
	}
	return paths, true
}

// withoutShimDirs drops the PATH entries that hold pyenv shims.
func withoutShimDirs(path string) string {
	var keep []string
	for _, dir := range filepath.SplitList(path) {
		if filepath.Base(dir) == "shims" {
			if _, shim := pyenvShim(filepath.Join(dir, defaultPythonName)); shim {
				continue
			}
			if strings.Contains(dir, "pyenv") {
				continue
			}
		}
		keep = append(keep, dir)
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

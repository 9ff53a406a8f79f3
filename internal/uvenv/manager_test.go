package uvenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pyexec/pyexec/internal/testutil/pyinterp"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
)

// basePython is the real interpreter envs are built on (see pyinterp.Real);
// set by newFixture before any use.
var basePython string

type fixture struct {
	t      *testing.T
	uv     string
	wheels string
	state  string
}

// newFixture finds uv and python (skipping when absent), builds the test
// wheels, and makes a world-traversable state dir. Every uv call is
// hermetic: --no-index --find-links WHEELS --offline.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	basePython = pyinterp.Real(t)
	uv, err := FindUV(os.Environ())
	if err != nil {
		t.Skip(err)
	}
	return &fixture{t: t, uv: uv, wheels: wheels.Dir(t), state: publicTempDir(t)}
}

// publicTempDir is t.TempDir made traversable by other users (t.TempDir's
// parent is 0700), for the test that runs Python as nobody.
func publicTempDir(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func (f *fixture) config() Config {
	return Config{
		StateDir: f.state,
		UV:       f.uv,
		Index:    IndexSettings{NoIndex: true, FindLinks: []string{f.wheels}, Offline: true},
	}
}

func (f *fixture) manager(mod ...func(*Config)) *Manager {
	f.t.Helper()
	cfg := f.config()
	for _, fn := range mod {
		fn(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(m.Wait) // background sealing must end before the temp dirs go
	return m
}

func ensure(t *testing.T, m *Manager, spec Spec) Env {
	t.Helper()
	if spec.Confine == nil {
		spec.Confine = directConfiner
	}
	env, release, err := m.Ensure(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return env
}

// py runs code with the env's python directly (no uv), as the engine does.
func py(t *testing.T, python, code string) string {
	t.Helper()
	out, err := exec.Command(python, "-c", code).CombinedOutput()
	if err != nil {
		t.Fatalf("%s -c %q: %v\n%s", python, code, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestEnsureRequirements(t *testing.T) {
	f := newFixture(t)
	m := f.manager()
	tests := []struct {
		name     string
		reqs     []string
		resolved []string
		check    string // python code printing "ok"
	}{
		{name: "single", reqs: []string{"pyexec-alpha"}, resolved: []string{"pyexec-alpha==2.0"},
			check: "import pyexec_alpha; assert pyexec_alpha.__version__ == '2.0'; print('ok')"},
		{name: "transitive", reqs: []string{"pyexec-beta"}, resolved: []string{"pyexec-alpha==2.0", "pyexec-beta==1.0"},
			check: "import pyexec_alpha, pyexec_beta; print('ok')"},
		{name: "pinned", reqs: []string{"pyexec-alpha==1.0"}, resolved: []string{"pyexec-alpha==1.0"},
			check: "import pyexec_alpha; assert pyexec_alpha.__version__ == '1.0'; print('ok')"},
		{name: "pinned under a transitive dependency", reqs: []string{"pyexec-beta", "pyexec-alpha<2"}, resolved: []string{"pyexec-alpha==1.0", "pyexec-beta==1.0"},
			check: "import pyexec_alpha; assert pyexec_alpha.__version__ == '1.0'; print('ok')"},
		{name: "entry point survives the rename", reqs: []string{"pyexec-tool"}, resolved: []string{"pyexec-tool==1.0"},
			check: "import subprocess, sys, os; print(subprocess.run([os.path.join(os.path.dirname(sys.executable), 'pyexec-tool')], capture_output=True, text=True, check=True).stdout.strip().split()[-1])"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := ensure(t, m, Spec{Python: basePython, Requirements: tt.reqs})
			if env.Strategy != StrategyEnv || !env.Built {
				t.Errorf("strategy %q built %v, want uv-env built", env.Strategy, env.Built)
			}
			if !slices.Equal(env.Resolved, tt.resolved) {
				t.Errorf("resolved %q, want %q", env.Resolved, tt.resolved)
			}
			if !strings.HasPrefix(env.PythonVersion, "3.") {
				t.Errorf("python version %q", env.PythonVersion)
			}
			if got := py(t, env.Python, tt.check); got != "ok" {
				t.Errorf("check printed %q", got)
			}
		})
	}
	if got := m.builds.Load(); got != int64(len(tests)) {
		t.Errorf("%d builds for %d distinct requirement lists", got, len(tests))
	}
}

func TestEnsureCacheKey(t *testing.T) {
	f := newFixture(t)
	m := f.manager()
	a1 := ensure(t, m, Spec{Python: basePython, Requirements: []string{"pyexec-alpha==1.0"}})
	a2 := ensure(t, m, Spec{Python: basePython, Requirements: []string{"pyexec-alpha==2.0"}})
	if a1.Dir == a2.Dir {
		t.Fatal("alpha==1.0 and alpha==2.0 share an env")
	}
	// Same requirements, spelled differently and in another order: same env.
	same := ensure(t, m, Spec{Python: basePython, Requirements: []string{" PyExec_Alpha == 1.0", "pyexec-alpha==1.0"}})
	if same.Dir != a1.Dir || same.Built {
		t.Fatalf("equivalent spelling rebuilt: %s vs %s (built %v)", same.Dir, a1.Dir, same.Built)
	}
	// Other index settings: another env.
	other := ensure(t, m, Spec{Python: basePython, Requirements: []string{"pyexec-alpha==1.0"}, Index: IndexSettings{ExtraIndexURLs: nil, FindLinks: []string{f.wheels + "/."}}})
	if other.Dir == a1.Dir {
		t.Fatal("different index settings share an env")
	}
	if got := m.builds.Load(); got != 3 {
		t.Fatalf("%d builds, want 3", got)
	}
	if py(t, a1.Python, "import pyexec_alpha; print(pyexec_alpha.__version__)") != "1.0" ||
		py(t, a2.Python, "import pyexec_alpha; print(pyexec_alpha.__version__)") != "2.0" {
		t.Fatal("wrong versions installed")
	}
}

// TestCacheHitWithoutUV proves the hot path runs no uv: after a build, a
// manager whose uv does not exist (and with an empty PATH) still serves the
// env; only a new build fails, with ErrNoUV and the install hint.
func TestCacheHitWithoutUV(t *testing.T) {
	f := newFixture(t)
	spec := Spec{Python: basePython, Requirements: []string{"pyexec-beta"}}
	env := ensure(t, f.manager(), spec)

	noUV := f.manager(func(c *Config) {
		c.UV = filepath.Join(t.TempDir(), "no-such-uv")
		c.Environ = []string{"PATH="}
	})
	t.Setenv("PATH", "")
	hit, release, err := noUV.Ensure(context.Background(), spec, func(phase, detail string) {
		t.Errorf("cache hit reported progress %s %s", phase, detail)
	})
	if err != nil {
		t.Fatalf("cache hit without uv: %v", err)
	}
	defer release()
	if hit.Built || hit.Dir != env.Dir || !slices.Equal(hit.Resolved, env.Resolved) {
		t.Fatalf("hit %+v, want the env built before %+v", hit, env)
	}
	if noUV.builds.Load() != 0 {
		t.Fatal("a cache hit started a build")
	}
	if got := py(t, hit.Python, "import pyexec_beta; print('ok')"); got != "ok" {
		t.Fatal(got)
	}

	_, _, err = noUV.Ensure(context.Background(), Spec{Python: basePython, Requirements: []string{"pyexec-alpha==1.0"}}, nil)
	if !errors.Is(err, ErrNoUV) || !strings.Contains(err.Error(), `pip install uv`) {
		t.Fatalf("build without uv: err = %v, want ErrNoUV with the install hint", err)
	}
	// A manager that found no uv at all says the same.
	none, err := New(Config{StateDir: f.state, Environ: []string{"PATH=", "HOME=/nonexistent"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.UVPath(); !errors.Is(err, ErrNoUV) {
		t.Fatalf("UVPath err = %v", err)
	}
	_, _, err = none.Ensure(context.Background(), Spec{Python: basePython, Requirements: []string{"pyexec-alpha==1.0"}}, nil)
	if !errors.Is(err, ErrNoUV) {
		t.Fatalf("err = %v, want ErrNoUV", err)
	}
}

// TestConcurrentEnsureBuildsOnce starts identical requests at once, through
// one manager (in-process singleflight) and through two managers on the
// same state dir (the flock path two server processes take).
func TestConcurrentEnsureBuildsOnce(t *testing.T) {
	f := newFixture(t)
	managers := []*Manager{f.manager(), f.manager()}
	spec := Spec{Python: basePython, Requirements: []string{"pyexec-beta", "pyexec-tool"}}
	const n = 8
	var wg sync.WaitGroup
	dirs := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			env, release, err := managers[i%2].Ensure(context.Background(), spec, nil)
			if err == nil {
				dirs[i] = env.Dir
				release()
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Fatalf("request %d got %s, request 0 got %s", i, dirs[i], dirs[0])
		}
	}
	if got := managers[0].builds.Load() + managers[1].builds.Load(); got != 1 {
		t.Fatalf("%d builds for %d identical requests, want 1", got, n)
	}
}

func TestConflictCarriesUVExplanation(t *testing.T) {
	f := newFixture(t)
	m := f.manager()
	for _, reqs := range [][]string{
		{"pyexec-alpha==1.0", "pyexec-alpha==2.0"},
		{"pyexec-gamma"},           // needs pyexec-alpha<1, which does not exist
		{"pyexec-no-such-package"}, // a misspelled package
	} {
		_, _, err := m.Ensure(context.Background(), Spec{Python: basePython, Requirements: reqs}, nil)
		if err == nil || !strings.Contains(err.Error(), "No solution found") {
			t.Fatalf("%q: err = %v, want uv's \"No solution found\" explanation", reqs, err)
		}
		var uvErr *UVError
		if !errors.As(err, &uvErr) {
			t.Fatalf("%q: err is not a *UVError: %T", reqs, err)
		}
	}
	envs, err := m.List(context.Background())
	if err != nil || len(envs) != 0 {
		t.Fatalf("failed builds left envs: %v %v", envs, err)
	}
	if left, _ := os.ReadDir(m.layout.tmp()); len(left) != 0 {
		t.Fatalf("failed builds left temp dirs: %v", left)
	}
}

func TestRequiresPython(t *testing.T) {
	f := newFixture(t)
	_, _, err := f.manager().Ensure(context.Background(), Spec{Python: basePython, RequiresPython: ">=9", Requirements: []string{"pyexec-alpha"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "requires-python") {
		t.Fatalf("err = %v", err)
	}
}

func TestProgressPhases(t *testing.T) {
	f := newFixture(t)
	var phases []string
	_, release, err := f.manager().Ensure(context.Background(), Spec{Python: basePython, Requirements: []string{"pyexec-beta"}},
		func(phase, detail string) {
			if len(phases) == 0 || phases[len(phases)-1] != phase {
				phases = append(phases, phase)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	release()
	want := []string{PhaseCreating, PhaseResolving, PhaseDownloading, PhaseInstalling, PhaseDone}
	if !slices.Equal(phases, want) {
		t.Fatalf("phases %q, want %q", phases, want)
	}
}

func TestEvictionUnderSizeCap(t *testing.T) {
	f := newFixture(t)
	m := f.manager(func(c *Config) { c.MaxBytes = 1 }) // every env is over the cap
	ctx := context.Background()

	a, releaseA, err := m.Ensure(ctx, Spec{Python: basePython, Requirements: []string{"pyexec-alpha==1.0"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// While a is in use, building b must not evict it.
	b, releaseB, err := m.Ensure(ctx, Spec{Python: basePython, Requirements: []string{"pyexec-alpha==2.0"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.Python); err != nil {
		t.Fatalf("env in use was evicted: %v", err)
	}
	envs, _ := m.List(ctx)
	if len(envs) != 2 || !envs[0].InUse || !envs[1].InUse {
		t.Fatalf("list: %+v", envs)
	}
	releaseA()
	releaseB()
	// Building c evicts the least recently used envs no longer in use.
	c, releaseC, err := m.Ensure(ctx, Spec{Python: basePython, Requirements: []string{"pyexec-tool"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseC()
	m.Wait() // envs still being sealed are evicted once sealed
	envs, _ = m.List(ctx)
	if len(envs) != 1 || envs[0].Dir != c.Dir {
		t.Fatalf("after eviction: %+v", envs)
	}
	for _, gone := range []string{a.Dir, b.Dir} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Fatalf("%s not evicted: %v", gone, err)
		}
	}
	// An evicted env is simply rebuilt on demand.
	again := ensure(t, m, Spec{Python: basePython, Requirements: []string{"pyexec-alpha==1.0"}})
	if !again.Built || py(t, again.Python, "import pyexec_alpha; print(pyexec_alpha.__version__)") != "1.0" {
		t.Fatal("evicted env not rebuilt")
	}
}

func TestListAndPrune(t *testing.T) {
	f := newFixture(t)
	m := f.manager()
	ctx := context.Background()
	for _, r := range []string{"pyexec-alpha==1.0", "pyexec-alpha==2.0"} {
		_, release, err := m.Ensure(ctx, Spec{Python: basePython, Requirements: []string{r}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	held := ensure(t, m, Spec{Python: basePython, Requirements: []string{"pyexec-beta"}})
	envs, err := m.List(ctx)
	if err != nil || len(envs) != 3 {
		t.Fatalf("list: %v %v", envs, err)
	}
	for _, e := range envs {
		if e.SizeBytes <= 0 || len(e.Resolved) == 0 || e.Strategy != StrategyEnv {
			t.Fatalf("incomplete info: %+v", e)
		}
	}
	m.Wait() // an env being sealed counts as in use
	res, err := m.Prune(ctx, PruneOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 2 || res.Kept != 1 || res.FreedBytes <= 0 {
		t.Fatalf("prune: %+v", res)
	}
	envs, _ = m.List(ctx)
	if len(envs) != 1 || envs[0].Dir != held.Dir {
		t.Fatalf("prune removed an env in use: %+v", envs)
	}
}

// TestEnvIsReadOnlyForRuns proves a run cannot change a cached env that other
// runs share: as an unprivileged uid (what the sandbox runs scripts as) it
// can neither write into site-packages, nor edit or remove an installed
// module, nor plant a .pth hook (what an install would do), nor touch bin/. Root ignores file modes, so this needs root to switch
// uid; as a normal user the modes are checked directly.
func TestEnvIsReadOnlyForRuns(t *testing.T) {
	f := newFixture(t)
	m := f.manager()
	env := ensure(t, m, Spec{Python: basePython, Requirements: []string{"pyexec-alpha"}})
	m.Wait() // sealed: bytecode compiled, read-only
	if man, err := readManifest(filepath.Join(env.Dir, manifestName)); err != nil || !man.Sealed {
		t.Fatalf("env not sealed: %+v %v", man, err)
	}
	if matches, _ := filepath.Glob(filepath.Join(env.Dir, "lib", "python*", "site-packages", "pyexec_alpha", "__pycache__", "*.pyc")); len(matches) == 0 {
		t.Fatal("no bytecode compiled for pyexec_alpha")
	}
	site := py(t, env.Python, "import pyexec_alpha, os; print(os.path.dirname(os.path.dirname(pyexec_alpha.__file__)))")

	err := filepath.Walk(env.Dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink == 0 && fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s is writable: %v", p, fi.Mode())
		}
		if fi.Mode().Perm()&0o004 == 0 {
			t.Errorf("%s is not world-readable: %v", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot run Python as another uid")
	}
	code := `
import os, sys
site = sys.argv[1]
failures = []
for action, fn in [
    ("create a file in site-packages", lambda: open(os.path.join(site, "evil.py"), "w")),
    ("edit an installed module", lambda: open(os.path.join(site, "pyexec_alpha", "__init__.py"), "a")),
    ("create a package dir", lambda: os.mkdir(os.path.join(site, "evil"))),
    ("remove a module", lambda: os.remove(os.path.join(site, "pyexec_alpha", "__init__.py"))),
    ("install a .pth hook", lambda: open(os.path.join(site, "zz-evil.pth"), "w")),
    ("replace the env's python", lambda: os.symlink("/bin/sh", os.path.join(os.path.dirname(sys.executable), "python-evil"))),
    ("rewrite the manifest", lambda: open(os.path.join(sys.prefix, "pyexec-env.json"), "w")),
]:
    try:
        fn()
        failures.append(action)
    except PermissionError:
        pass
print("failures:", failures)
`
	cmd := exec.Command(env.Python, "-c", code, site)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "TMPDIR=/tmp"}
	asNobody(t, cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run as nobody: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "failures: []" {
		t.Fatalf("an unprivileged run modified the env: %s", got)
	}
}

// TestCancelledBuild: cancelling a build kills uv's process group, leaves
// neither an env nor temp files, and a later request builds normally.
func TestCancelledBuild(t *testing.T) {
	f := newFixture(t)
	m := f.manager()
	spec := Spec{Python: basePython, Requirements: []string{"pyexec-beta"}}
	ctx, cancel := context.WithCancel(context.Background())
	_, _, err := m.Ensure(ctx, spec, func(phase, _ string) {
		if phase == PhaseDownloading {
			cancel() // uv pip install is running: it just printed "Resolved ..."
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if envs, _ := m.List(context.Background()); len(envs) != 0 {
		t.Fatalf("cancelled build published %+v", envs)
	}
	if left, _ := os.ReadDir(m.layout.tmp()); len(left) != 0 {
		t.Fatalf("cancelled build left %v", left)
	}
	env := ensure(t, m, spec)
	if !env.Built || py(t, env.Python, "import pyexec_beta; print('ok')") != "ok" {
		t.Fatal("rebuild after cancel failed")
	}
}

// TestEvictionSparesEnvsInUseByAnotherProcess: the in-use mark is a shared
// flock, so a second manager on the same state dir (another server process)
// never evicts an env the first one is running in.
func TestEvictionSparesEnvsInUseByAnotherProcess(t *testing.T) {
	f := newFixture(t)
	m1 := f.manager()
	m2 := f.manager(func(c *Config) { c.MaxBytes = 1 })
	held := ensure(t, m1, Spec{Python: basePython, Requirements: []string{"pyexec-alpha==1.0"}})
	_, release, err := m1.Ensure(context.Background(), Spec{Python: basePython, Requirements: []string{"pyexec-alpha==2.0"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	release() // alpha 2.0: built by m1, no longer in use
	m1.Wait() // and sealed (a sealing env counts as in use)
	fresh := ensure(t, m2, Spec{Python: basePython, Requirements: []string{"pyexec-beta"}})
	envs, _ := m2.List(context.Background())
	var dirs []string
	for _, e := range envs {
		dirs = append(dirs, e.Dir)
	}
	slices.Sort(dirs)
	want := []string{held.Dir, fresh.Dir}
	slices.Sort(want)
	if !slices.Equal(dirs, want) {
		t.Fatalf("envs after m2's eviction: %v, want the one m1 holds and m2's own: %v", dirs, want)
	}
}

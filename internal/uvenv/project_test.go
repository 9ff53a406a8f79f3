package uvenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// newProject writes a virtual (not packaged) uv project depending on deps
// and, when lock is set, locks it with uv against the test wheels.
func (f *fixture) newProject(deps []string, lock bool) string {
	t := f.t
	t.Helper()
	dir := t.TempDir()
	f.writePyproject(dir, deps)
	if lock {
		f.lock(dir)
	}
	return dir
}

func (f *fixture) writePyproject(dir string, deps []string) {
	quoted := make([]string, len(deps))
	for i, d := range deps {
		quoted[i] = `"` + d + `"`
	}
	writeFile(f.t, filepath.Join(dir, "pyproject.toml"),
		"[project]\nname = \"demo\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\ndependencies = ["+strings.Join(quoted, ", ")+"]\n")
}

func (f *fixture) lock(dir string) {
	f.t.Helper()
	cmd := exec.Command(f.uv, "lock", "--offline", "--no-index", "--find-links", f.wheels, "--python", basePython)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "UV_CACHE_DIR="+filepath.Join(f.state, "uv-cache"), "UV_PYTHON_DOWNLOADS=never")
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("uv lock: %v\n%s", err, out)
	}
}

func TestProjectEnv(t *testing.T) {
	f := newFixture(t)
	m := f.manager()
	dir := f.newProject([]string{"pyexec-beta", "pyexec-alpha<2"}, true)
	lockBefore, _ := os.ReadFile(filepath.Join(dir, "uv.lock"))

	env := ensure(t, m, Spec{Python: basePython, ProjectDir: dir})
	if env.Strategy != StrategyProject || !env.Built || env.ProjectDir != dir {
		t.Fatalf("env %+v", env)
	}
	if want := []string{"pyexec-alpha==1.0", "pyexec-beta==1.0"}; !slices.Equal(env.Resolved, want) {
		t.Fatalf("resolved %q, want %q", env.Resolved, want)
	}
	if got := py(t, env.Python, "import pyexec_alpha, pyexec_beta; print(pyexec_alpha.__version__)"); got != "1.0" {
		t.Fatalf("alpha %s", got)
	}
	// Second request: a hit, from a script in a subdirectory found by FindProject.
	sub := filepath.Join(dir, "scripts")
	writeFile(t, filepath.Join(sub, "run.py"), "")
	found, ok := FindProject(sub, dir)
	if !ok || found != dir {
		t.Fatalf("FindProject = %q %v", found, ok)
	}
	hit := ensure(t, m, Spec{Python: basePython, ProjectDir: found})
	if hit.Built || hit.Dir != env.Dir {
		t.Fatalf("second request rebuilt: %+v", hit)
	}

	// Extra requirements on top of a project (like `uv run --with`) keep
	// the project's locked versions.
	with := ensure(t, m, Spec{Python: basePython, ProjectDir: dir, Requirements: []string{"pyexec-tool", "pyexec-alpha"}})
	if want := []string{"pyexec-alpha==1.0", "pyexec-beta==1.0", "pyexec-tool==1.0"}; !slices.Equal(with.Resolved, want) || with.Dir == env.Dir {
		t.Fatalf("project + extras resolved %q in %s", with.Resolved, with.Dir)
	}

	// A changed pyproject + lock is another env.
	f.writePyproject(dir, []string{"pyexec-beta"})
	os.Remove(filepath.Join(dir, "uv.lock")) // uv lock would keep alpha 1.0 as a preference
	f.lock(dir)
	changed := ensure(t, m, Spec{Python: basePython, ProjectDir: dir})
	if !changed.Built || changed.Dir == env.Dir || !slices.Contains(changed.Resolved, "pyexec-alpha==2.0") {
		t.Fatalf("after changing the project: %+v", changed)
	}
	if string(lockBefore) == "" {
		t.Fatal("no lock was written")
	}
}

// TestProjectSyncModes: the default mirrors `uv run` (an outdated lock is
// updated); SyncLocked mirrors `uv run --locked` (it fails, saying why).
func TestProjectSyncModes(t *testing.T) {
	f := newFixture(t)
	dir := f.newProject([]string{"pyexec-alpha"}, true)
	f.writePyproject(dir, []string{"pyexec-alpha", "pyexec-tool"}) // the lock is now outdated

	_, _, err := f.manager(func(c *Config) { c.ProjectSync = SyncLocked }).Ensure(context.Background(), Spec{Python: basePython, ProjectDir: dir, Confine: directConfiner}, nil)
	if err == nil || !strings.Contains(err.Error(), "lock") {
		t.Fatalf("locked sync with an outdated lock: err = %v", err)
	}

	m := f.manager()
	env := ensure(t, m, Spec{Python: basePython, ProjectDir: dir})
	if !slices.Contains(env.Resolved, "pyexec-tool==1.0") {
		t.Fatalf("default sync did not follow pyproject.toml: %q", env.Resolved)
	}
	lock, _ := os.ReadFile(filepath.Join(dir, "uv.lock"))
	if !strings.Contains(string(lock), "pyexec-tool") {
		t.Fatal("default sync did not update uv.lock as uv run does")
	}
	// The env was published under the key of the rewritten lock, so the
	// next request (which hashes the new lock) is a hit.
	if hit := ensure(t, m, Spec{Python: basePython, ProjectDir: dir}); hit.Built || hit.Dir != env.Dir {
		t.Fatalf("request after the lock rewrite rebuilt: %+v", hit)
	}
	if n := m.builds.Load(); n != 1 {
		t.Fatalf("%d builds", n)
	}
}

func TestProjectWithoutLock(t *testing.T) {
	f := newFixture(t)
	dir := f.newProject([]string{"pyexec-beta"}, false)
	env := ensure(t, f.manager(), Spec{Python: basePython, ProjectDir: dir})
	if env.Strategy != StrategyProject || !slices.Contains(env.Resolved, "pyexec-beta==1.0") {
		t.Fatalf("env %+v", env)
	}
}

package engine

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/testutil/pyinterp"
)

// The server's own hostile corpus: what a run can leave in the workspace
// for the server to trip over on the next request (a planted interpreter,
// build backend, local requirement, env_file swapped for a symlink). Every
// test here runs cold and warm (runBothModes). The rule they check: nothing
// a run could have written is executed, built, or read with the server's
// privileges outside a sandbox at least as strict as the run's.

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the server's privileges are what these tests guard")
	}
}

// plantInterpreter writes an executable shell script at path posing as an
// interpreter: it appends the uid it runs as to marker, then execs python.
// Whoever executes it leaves a trace.
func plantInterpreter(t *testing.T, path, marker, python string) {
	t.Helper()
	writeFile(t, path, fmt.Sprintf("#!/bin/sh\nid -u >> %s\nexec %s \"$@\"\n", marker, python))
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// uidsIn reads the uids a marker recorded.
func uidsIn(t *testing.T, marker string) []string {
	t.Helper()
	data, err := os.ReadFile(marker)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

func assertNeverRoot(t *testing.T, marker string) []string {
	t.Helper()
	uids := uidsIn(t, marker)
	for _, u := range uids {
		if u == "0" {
			t.Fatalf("%s was executed as uid 0 (marker: %v)", marker, uids)
		}
	}
	return uids
}

// TestPlantedInterpreterNeverRunsAsServer: a run writes d/.venv/bin/python
// (a shell script) or any other "interpreter" into the workspace; the next
// request naming it (cwd d, or python: the path), under workspace or
// strict, must never make the server execute it as root. It runs
// confined, as nobody, or not at all.
func TestPlantedInterpreterNeverRunsAsServer(t *testing.T) {
	needRoot(t)
	python := pyinterp.Real(t)
	e, ws := newTestEngine(t, func(c *Config) { c.Python = python })
	marker := filepath.Join(ws, "marker")
	venvPy := filepath.Join(ws, "d", ".venv", "bin", "python")
	notPy := filepath.Join(ws, "notpython")
	plantInterpreter(t, venvPy, marker, python)
	plantInterpreter(t, notPy, marker, python)
	tests := []struct {
		name string
		req  Request
	}{
		{"cwd with a planted .venv", Request{Code: "print('ran')", Cwd: "d"}},
		{"python naming a workspace file", Request{Code: "print('ran')", Python: notPy}},
		{"strict, planted .venv", Request{Code: "print('ran')", Cwd: "d", Sandbox: "strict"}},
		{"strict, python naming a workspace file", Request{Code: "print('ran')", Python: notPy, Sandbox: "strict"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(marker)
			res, err := e.Run(context.Background(), tt.req, nil)
			uids := assertNeverRoot(t, marker)
			if err != nil {
				t.Fatalf("the planted interpreter works when confined, but the request failed: %v", err)
			}
			if res.Stdout != "ran\n" || !strings.Contains(res.Sandbox, "uid 65534") || len(uids) == 0 {
				t.Fatalf("stdout %q sandbox %q uids %v stderr %q", res.Stdout, res.Sandbox, uids, res.Stderr)
			}
		})
	}
	// A server started with --sandbox strict: the same.
	strict, sws := newTestEngine(t, func(c *Config) { c.Python = python; c.Sandbox.Policy = sandbox.PolicyStrict })
	smarker := filepath.Join(sws, "marker")
	plantInterpreter(t, filepath.Join(sws, "d", ".venv", "bin", "python"), smarker, python)
	plantInterpreter(t, filepath.Join(sws, "notpython"), smarker, python)
	for _, req := range []Request{{Code: "print('ran')", Cwd: "d"}, {Code: "print('ran')", Python: filepath.Join(sws, "notpython")}} {
		res, err := strict.Run(context.Background(), req, nil)
		assertNeverRoot(t, smarker)
		if err != nil || res.Stdout != "ran\n" || !strings.HasPrefix(res.Sandbox, "strict") {
			t.Fatalf("strict server: %+v %v", res, err)
		}
	}

	// Nor may uv ever build an environment on it (uv would execute it
	// unconfined): the request is refused, naming python.
	os.Remove(marker)
	_, err := e.Run(context.Background(), Request{Code: "pass", Python: notPy, Dependencies: []string{"anything"}}, nil)
	var rerr *RequestError
	if !errors.As(err, &rerr) || rerr.Field != "python" || !strings.Contains(err.Error(), "python_version") {
		t.Fatalf("dependencies on a planted interpreter: %v", err)
	}
	assertNeverRoot(t, marker)
}

// TestSwappedVenvPythonNeverRunsAsServer: the cwd's .venv/bin/python is a
// real venv's (a symlink to a trusted interpreter) on the first request;
// what pyexec learned then (without executing it) must not let a later
// swap for a script run that script as root.
func TestSwappedVenvPythonNeverRunsAsServer(t *testing.T) {
	needRoot(t)
	python := pyinterp.Real(t)
	e, ws := newTestEngine(t, func(c *Config) { c.Python = python })
	venv := filepath.Join(ws, "d", ".venv")
	if out, err := exec.Command(python, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("venv: %v: %s", err, out)
	}
	first := run(t, e, Request{Code: "import sys; print(sys.prefix != sys.base_prefix)", Cwd: "d"})
	if first.Stdout != "True\n" || first.ExecutionStrategy != StrategyVenv {
		t.Fatalf("first run: %+v", first)
	}
	marker := filepath.Join(ws, "marker")
	for i := 0; i < 3; i++ {
		py := filepath.Join(venv, "bin", "python")
		os.Remove(py)
		plantInterpreter(t, py, marker, python)
		res, err := e.Run(context.Background(), Request{Code: "print('ran')", Cwd: "d"}, nil)
		assertNeverRoot(t, marker)
		if err != nil || res.Stdout != "ran\n" {
			t.Fatalf("after the swap: %+v %v", res, err)
		}
		// And back to a symlink, as a run could do between requests.
		os.Remove(py)
		os.Symlink(python, py)
		if res := run(t, e, Request{Code: "print('ok')", Cwd: "d"}); res.Stdout != "ok\n" {
			t.Fatalf("back to the symlink: %+v", res)
		}
	}
}

// TestVenvMetadataGrantsNothing: a venv's pyvenv.cfg and symlinks are
// written by runs; what they name must not widen what a run may read (a
// strict run reads only the system, its interpreter and the workspace).
func TestVenvMetadataGrantsNothing(t *testing.T) {
	needRoot(t)
	python := pyinterp.Real(t)
	secretDir, err := os.MkdirTemp("/var/tmp", "pyexec-grant-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(secretDir) })
	os.Chmod(secretDir, 0o755)
	os.MkdirAll(filepath.Join(secretDir, "bin"), 0o755)
	secret := filepath.Join(secretDir, "secret.txt")
	os.WriteFile(secret, []byte("TOP-SECRET"), 0o644)

	e, ws := newTestEngine(t, func(c *Config) { c.Python = python })
	venv := filepath.Join(ws, "d", ".venv")
	if out, err := exec.Command(python, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("venv: %v: %s", err, out)
	}
	// The home pyvenv.cfg names, and the target of a second "interpreter"
	// symlink, are the secret's directory.
	os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte("home = "+filepath.Join(secretDir, "bin")+"\ninclude-system-site-packages = false\n"), 0o644)
	read := fmt.Sprintf("try:\n    print(open(%q).read())\nexcept OSError as e:\n    print('DENIED', e.errno)\n", secret)
	res := run(t, e, Request{Code: read, Cwd: "d", Sandbox: "strict"})
	if strings.Contains(res.Stdout, "TOP-SECRET") || !strings.Contains(res.Stdout, "DENIED") {
		t.Fatalf("a strict run read what pyvenv.cfg named: %q %q", res.Stdout, res.Stderr)
	}
	// The same venv without the symlink to a trusted interpreter: no base
	// at all, and still no grant.
	py := filepath.Join(venv, "bin", "python")
	os.Remove(py)
	plantInterpreter(t, py, filepath.Join(ws, "marker"), python)
	res = run(t, e, Request{Code: read, Cwd: "d", Sandbox: "strict"})
	if strings.Contains(res.Stdout, "TOP-SECRET") || !strings.Contains(res.Stdout, "DENIED") {
		t.Fatalf("a strict run read what pyvenv.cfg named: %q %q", res.Stdout, res.Stderr)
	}
	assertNeverRoot(t, filepath.Join(ws, "marker"))
}

// evilProject writes, in dir, a project whose build backend is its own
// module (testdata/hostile/server/evil_backend.py): it records the uid it
// runs as in marker and tries to write each target.
func evilProject(t *testing.T, dir, name, marker string, targets []string, deps ...string) {
	t.Helper()
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "testdata", "hostile", "server", "evil_backend.py"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(targets))
	for i, p := range targets {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	backend := strings.NewReplacer("{marker}", marker, "{targets}", "["+strings.Join(quoted, ", ")+"]", "{name}", name).Replace(string(tmpl))
	writeFile(t, filepath.Join(dir, "evil_backend.py"), backend)
	qdeps := make([]string, len(deps))
	for i, d := range deps {
		qdeps[i] = fmt.Sprintf("%q", d)
	}
	writeFile(t, filepath.Join(dir, "pyproject.toml"), fmt.Sprintf(
		"[build-system]\nrequires = []\nbuild-backend = \"evil_backend\"\nbackend-path = [\".\"]\n\n[project]\nname = %q\nversion = \"1.0\"\nrequires-python = \">=3.8\"\ndependencies = [%s]\n",
		name, strings.Join(qdeps, ", ")))
	mod := strings.ReplaceAll(name, "-", "_")
	writeFile(t, filepath.Join(dir, mod, "__init__.py"), "BUILT_BY = 'source'\n")
}

// checkBackendMarker: the backend ran, never as root, and escaped nowhere.
func checkBackendMarker(t *testing.T, marker string, mustHaveRun bool) {
	t.Helper()
	data, _ := os.ReadFile(marker)
	s := string(data)
	if mustHaveRun && !strings.Contains(s, "uid ") {
		t.Fatalf("the build backend never ran (marker %q)", s)
	}
	if strings.Contains(s, "uid 0 ") || strings.Contains(s, "ESCAPED") {
		t.Fatalf("the build backend ran as root or wrote outside its build:\n%s", s)
	}
}

// TestPlantedBuildBackendRunsConfined: a planted project (backend-path =
// ["."]), a local requirement (file:// and relative, from dependencies and
// from a PEP 723 block) and an sdist on the index all have their build
// backend executed, but only confined: as the run user, unable to write
// the shared uv cache, the state dir or other environments.
func TestPlantedBuildBackendRunsConfined(t *testing.T) {
	needRoot(t)
	sdists := t.TempDir()
	os.Chmod(sdists, 0o755)
	e, ws, _ := depsEngine(t, func(c *Config) { c.Deps.Index.FindLinks = append(c.Deps.Index.FindLinks, sdists) })
	state := e.Config().StateDir
	// An env to try to poison.
	run(t, e, Request{Code: "pass", Dependencies: []string{"pyexec-alpha==1.0"}})
	envs, _ := filepath.Glob(filepath.Join(state, "envs", "[0-9a-f]*"))
	if len(envs) != 1 {
		t.Fatalf("envs %v", envs)
	}
	targets := []string{
		filepath.Join(state, "uv-cache", "pwned"), filepath.Join(state, "pwned"),
		filepath.Join(state, "envs", "pwned"), filepath.Join(envs[0], "pwned"),
		filepath.Join(state, "code", "pwned"), "/etc/pyexec-pwned", "/root/pyexec-pwned",
	}
	marker := filepath.Join(ws, "backend-marker")
	evilProject(t, filepath.Join(ws, "proj"), "evilproj", marker, targets, "pyexec-alpha==1.0")
	// Builds other than a project sync cannot write the workspace either.
	noWS := append([]string{filepath.Join(ws, "pwned-by-build")}, targets...)
	evilProject(t, filepath.Join(ws, "evilpkg"), "evilpkg", marker, noWS)
	evilProject(t, filepath.Join(ws, "evilpep"), "evilpep", marker, noWS)
	evilProject(t, filepath.Join(ws, "strictproj"), "evilstrict", marker, targets, "pyexec-beta")

	// An sdist of the same backend, on the index.
	sdistSrc := t.TempDir()
	evilProject(t, sdistSrc, "evilsdist", marker, noWS)
	tarball(t, sdistSrc, filepath.Join(sdists, "evilsdist-1.0.tar.gz"), "evilsdist-1.0")

	// Only a project sync may write the workspace (it may rewrite uv.lock),
	// so only it can leave the marker there; the others show the uid they
	// were built as in the module they built (BUILT_BY), and the targets
	// are checked at the end.
	tests := []struct {
		name   string
		req    Request
		want   string
		marker bool
	}{
		{"project", Request{Code: "import evilproj, pyexec_alpha; print(evilproj.BUILT_BY)", Cwd: "proj"}, "65534", true},
		{"file:// requirement", Request{Code: "import evilpkg; print(evilpkg.BUILT_BY)", Dependencies: []string{"evilpkg @ file://" + filepath.Join(ws, "evilpkg")}}, "65534", false},
		{"PEP 723 relative path", Request{Code: "# /// script\n# dependencies = [\"evilpep @ ./evilpep\"]\n# ///\nimport evilpep; print(evilpep.BUILT_BY)"}, "65534", false},
		{"sdist on the index", Request{Code: "import evilsdist; print(evilsdist.BUILT_BY)", Dependencies: []string{"evilsdist"}}, "65534", false},
		{"project, strict (no network, reads limited)", Request{Code: "import evilstrict; print(evilstrict.BUILT_BY)", Cwd: "strictproj", Sandbox: "strict"}, "65534", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(marker)
			res, err := e.Run(context.Background(), tt.req, nil)
			checkBackendMarker(t, marker, tt.marker)
			if err != nil {
				t.Fatalf("the confined build failed: %v", err)
			}
			if strings.TrimSpace(res.Stdout) != tt.want {
				t.Fatalf("stdout %q (built by uid %s?) stderr %q", res.Stdout, tt.want, res.Stderr)
			}
		})
	}
	for _, p := range noWS {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

// tarball packs dir as a source distribution whose top directory is top.
func tarball(t *testing.T, dir, out, top string) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, _ := os.ReadFile(p)
		tw.WriteHeader(&tar.Header{Name: top + "/" + rel, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
		return nil
	})
	pkgInfo := "Metadata-Version: 2.1\nName: " + strings.SplitN(top, "-", 2)[0] + "\nVersion: 1.0\n"
	tw.WriteHeader(&tar.Header{Name: top + "/PKG-INFO", Mode: 0o644, Size: int64(len(pkgInfo)), Typeflag: tar.TypeReg})
	tw.Write([]byte(pkgInfo))
	tw.Close()
	gz.Close()
}

// TestLocalRequirementsMustBeInWorkspace: file:// and path requirements
// outside the workspace (directly, through .., or through a symlink) are
// refused naming dependencies, and nothing is built.
func TestLocalRequirementsMustBeInWorkspace(t *testing.T) {
	needRoot(t)
	e, ws, _ := depsEngine(t)
	outside := t.TempDir()
	marker := filepath.Join(outside, "marker")
	evilProject(t, filepath.Join(outside, "evilpkg"), "evilpkg", marker, nil)
	os.Symlink(filepath.Join(outside, "evilpkg"), filepath.Join(ws, "link"))
	for _, tt := range []struct {
		name string
		req  Request
	}{
		{"file:// outside", Request{Code: "pass", Dependencies: []string{"evilpkg @ file://" + filepath.Join(outside, "evilpkg")}}},
		{"absolute path outside", Request{Code: "pass", Dependencies: []string{"evilpkg @ " + filepath.Join(outside, "evilpkg")}}},
		{"dot-dot", Request{Code: "pass", Dependencies: []string{"evilpkg @ ../" + filepath.Base(outside) + "/evilpkg"}}},
		{"symlink out", Request{Code: "pass", Dependencies: []string{"evilpkg @ file://" + filepath.Join(ws, "link")}}},
		{"PEP 723 block", Request{Code: "# /// script\n# dependencies = [\"evilpkg @ file://" + filepath.Join(outside, "evilpkg") + "\"]\n# ///\n"}},
		{"unknown scheme", Request{Code: "pass", Dependencies: []string{"evilpkg @ ftp://example.invalid/evilpkg.tar.gz"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, check := range []func(context.Context, Request) error{
				func(ctx context.Context, r Request) error { return e.Validate(ctx, r) },
				func(ctx context.Context, r Request) error { _, err := e.Run(ctx, r, nil); return err },
			} {
				err := check(context.Background(), tt.req)
				var rerr *RequestError
				if !errors.As(err, &rerr) || rerr.Field != "dependencies" {
					t.Fatalf("err = %v, want a dependencies error", err)
				}
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a backend outside the workspace ran")
	}
	if got := e.Environments().Builds(); got != 0 {
		t.Fatalf("%d builds", got)
	}
}

// secretFile is a root-only file outside the workspace.
func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEnvFileReadAsRunUser: the env_file is read as the run would: a
// symlink out is refused, so is a file only another user (or root, in a
// workspace not idmapped for the run) may read, and a FIFO does not hang
// the server.
func TestEnvFileReadAsRunUser(t *testing.T) {
	needRoot(t)
	e, ws := newTestEngine(t)
	secret := secretFile(t, "LEAK=TOP-SECRET\n")
	os.Symlink(secret, filepath.Join(ws, "out.env"))
	writeFile(t, filepath.Join(ws, "theirs.env"), "LEAK=TOP-SECRET\n")
	os.Chown(filepath.Join(ws, "theirs.env"), 1234, 1234)
	os.Chmod(filepath.Join(ws, "theirs.env"), 0o600)
	writeFile(t, filepath.Join(ws, "conf", "ok.env"), "OK=yes\n")
	os.Symlink("conf/ok.env", filepath.Join(ws, "in.env"))
	syscall.Mkfifo(filepath.Join(ws, "fifo.env"), 0o644)

	code := "import os; print(os.environ.get('OK'), os.environ.get('LEAK'))"
	for _, tt := range []struct{ file, want string }{
		{"out.env", "through a symlink"},
		{"theirs.env", "not readable by the run's user"},
		{"fifo.env", "not a regular file"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			res, err := e.Run(context.Background(), Request{Code: code, EnvFile: tt.file}, nil)
			var rerr *RequestError
			if !errors.As(err, &rerr) || rerr.Field != "env_file" || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v (stdout %q), want an env_file error containing %q", err, res.Stdout, tt.want)
			}
			if strings.Contains(err.Error(), "TOP-SECRET") {
				t.Fatal("the error shows the secret")
			}
		})
	}
	if res := run(t, e, Request{Code: code, EnvFile: "in.env"}); res.Stdout != "yes None\n" {
		t.Fatalf("a symlink inside the workspace: %q", res.Stdout)
	}
}

// swapLoop flips path between a regular file with content and a symlink to
// target until stop is closed, each change an atomic rename. It returns
// how many flips it made.
func swapLoop(t *testing.T, path, content, target string, stop <-chan struct{}) *atomic.Int64 {
	t.Helper()
	var flips atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tmp := path + ".swap"
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.Remove(tmp)
			if i%2 == 0 {
				os.WriteFile(tmp, []byte(content), 0o644)
			} else {
				os.Symlink(target, tmp)
			}
			os.Rename(tmp, path)
			flips.Add(1)
		}
	}()
	t.Cleanup(wg.Wait)
	return &flips
}

// TestEnvFileSwapRace: env_file (and script_path, whose PEP 723 block the
// server reads) flipped between a regular file and a symlink to a root-only
// file while requests come in: a fixed number of requests, zero leaks.
func TestEnvFileSwapRace(t *testing.T) {
	needRoot(t)
	e, ws := newTestEngine(t)
	secret := secretFile(t, "LEAK=TOP-SECRET\n")
	secretScript := secretFile(t, "# /// script\n# dependencies = [\"topsecretdep\"]\n# ///\nprint('TOP-SECRET')\n")
	const iterations = 150

	for _, tt := range []struct {
		name, path, content, target string
		req                         Request
	}{
		{"env_file", filepath.Join(ws, "race.env"), "SAFE=1\n", secret,
			Request{Code: "import os; print(os.environ.get('LEAK', 'none'))", EnvFile: "race.env"}},
		{"script_path", filepath.Join(ws, "race.py"), "print('safe')\n", secretScript,
			Request{ScriptPath: "race.py"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.WriteFile(tt.path, []byte(tt.content), 0o644)
			stop := make(chan struct{})
			flips := swapLoop(t, tt.path, tt.content, tt.target, stop)
			leaks, ok, refused := 0, 0, 0
			for i := 0; i < iterations; i++ {
				res, err := e.Run(context.Background(), tt.req, nil)
				text := res.Stdout + res.Stderr + strings.Join(res.ResolvedDependencies, " ")
				if err != nil {
					text += err.Error()
					refused++
				} else {
					ok++
				}
				if strings.Contains(text, "TOP-SECRET") || strings.Contains(text, "topsecretdep") {
					leaks++
					t.Errorf("leak on iteration %d: %q", i, text)
				}
			}
			close(stop)
			t.Logf("%d requests: %d ran, %d refused, %d leaks, %d flips", iterations, ok, refused, leaks, flips.Load())
			if ok == 0 && refused == 0 {
				t.Fatal("no request completed")
			}
		})
	}
}

// TestProjectFilesReadAsRunUser: a pyproject.toml swapped for a symlink to a
// root-only project (or only another user may read) is no project: the
// server does not read it for the run, and nothing of it shows.
func TestProjectFilesReadAsRunUser(t *testing.T) {
	needRoot(t)
	e, ws, _ := depsEngine(t)
	secret := secretFile(t, "[project]\nname = \"x\"\nversion = \"1\"\ndependencies = [\"topsecretdep\"]\n")
	os.MkdirAll(filepath.Join(ws, "p1"), 0o755)
	os.Symlink(secret, filepath.Join(ws, "p1", "pyproject.toml"))
	writeFile(t, filepath.Join(ws, "p2", "pyproject.toml"), "[project]\nname = \"x\"\nversion = \"1\"\ndependencies = [\"topsecretdep\"]\n")
	os.Chown(filepath.Join(ws, "p2", "pyproject.toml"), 1234, 1234)
	os.Chmod(filepath.Join(ws, "p2", "pyproject.toml"), 0o600)
	for _, cwd := range []string{"p1", "p2"} {
		res, err := e.Run(context.Background(), Request{Code: "print('plain')", Cwd: cwd}, nil)
		if err != nil || res.Stdout != "plain\n" || res.ExecutionStrategy != StrategySystem {
			t.Fatalf("%s: %+v %v", cwd, res, err)
		}
	}
	if e.Environments().Builds() != 0 {
		t.Fatal("an environment was built from a file the run could not read")
	}
}

// TestWarmPythonPathInHiddenDirStaysWarm: the warm path lists a PYTHONPATH
// directory only when the run could (so a request naming a root-only one
// learns nothing from warm or cold); a directory the run is granted though
// the run user cannot search its parent (the jobs helper in a state dir
// under /root) still runs warm.
func TestWarmPythonPathInHiddenDirStaysWarm(t *testing.T) {
	needRoot(t)
	e, _ := warmEngine(t, WarmConfig{Spares: 1})
	hidden := t.TempDir() // its parent is 0700
	helper := filepath.Join(hidden, "helper")
	writeFile(t, filepath.Join(helper, "pyexec_hidden_mod.py"), "X = 'helper'\n")
	runOnce := func() Result {
		res, err := e.RunWith(context.Background(), Request{Code: "import pyexec_hidden_mod; print(pyexec_hidden_mod.X)"}, nil, Extras{PythonPath: []string{helper}})
		if err != nil || res.Stdout != "helper\n" {
			t.Fatalf("%+v %v", res, err)
		}
		return res
	}
	runOnce() // starts the zygote (and may be replaced for the grant)
	runOnce()
	before := e.WarmStats().Warm
	runOnce()
	if st := e.WarmStats(); st.Warm != before+1 {
		t.Fatalf("a granted PYTHONPATH dir sent the run cold: %+v", st)
	}
}

// TestInterpreterInWritableTreeIsNeverTrusted: an interpreter the server
// would find itself (on PATH, or configured) but that lies in the
// workspace or the state dir is not executed by the server either: the
// default interpreter is refused with the reason, discovery skips it.
func TestInterpreterInWritableTreeIsNeverTrusted(t *testing.T) {
	needRoot(t)
	python := pyinterp.Real(t)
	ws := t.TempDir()
	marker := filepath.Join(ws, "marker")
	planted := filepath.Join(ws, "bin", "python3")
	plantInterpreter(t, planted, marker, python)
	e, err := New(Config{Workspace: ws, StateDir: t.TempDir(), Python: planted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	_, err = e.Run(context.Background(), Request{Code: "print(1)"}, nil)
	if err == nil || !strings.Contains(err.Error(), "runs can write") {
		t.Fatalf("default interpreter in the workspace: %v", err)
	}
	for _, it := range e.Interpreters(context.Background()) {
		if strings.HasPrefix(it.Path, ws) {
			t.Errorf("discovered %s in the workspace", it.Path)
		}
	}
	if uids := uidsIn(t, marker); len(uids) != 0 {
		t.Fatalf("the planted default interpreter ran: %v", uids)
	}
}

// TestBuildsRunUnprivilegedUnderRunAsNone: with --run-as none runs stay
// root (without capabilities), by the operator's choice; a build that
// executes package code still runs as the unprivileged user.
func TestBuildsRunUnprivilegedUnderRunAsNone(t *testing.T) {
	needRoot(t)
	e, ws, _ := depsEngine(t, func(c *Config) { c.RunAs = sandbox.RunAsNone })
	evilProject(t, filepath.Join(ws, "evilpkg"), "evilpkg", filepath.Join(ws, "marker"), nil)
	res := run(t, e, Request{Code: "import os, evilpkg; print(os.getuid(), evilpkg.BUILT_BY)", Dependencies: []string{"evilpkg @ ./evilpkg"}})
	if strings.TrimSpace(res.Stdout) != "0 65534" {
		t.Fatalf("run uid, build uid = %q (want 0 65534); stderr %q", res.Stdout, res.Stderr)
	}
}

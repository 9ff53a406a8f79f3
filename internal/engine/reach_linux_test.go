package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// hiddenHome lays out what a root server on these machines has: a 0700
// home holding the state dir (like /root/.local/state/pyexec) next to a
// workspace nobody may write, and returns pyenv's interpreter under /root
// (itself 0700). It skips unless all of that is real here.
func hiddenHome(t *testing.T) (python, ws, state string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs a root server")
	}
	python = "/root/.pyenv/versions/3.11.7/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs " + python)
	}
	if st, _ := os.Stat("/root"); st.Mode().Perm()&0o001 != 0 {
		t.Skip("/root is searchable by others here")
	}
	base, err := os.MkdirTemp("/var/tmp", "pyexec-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	ws = filepath.Join(base, "ws")
	home := filepath.Join(base, "home")
	state = filepath.Join(home, ".local", "state", "pyexec")
	for _, d := range []string{ws, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(ws, 0o777)
	os.Chmod(home, 0o700)
	return python, ws, state
}

// With default settings, a root server whose state dir and interpreter
// live under 0700 directories runs Python as nobody: what the run needs is
// bound into its private mount namespace, and nothing else of those
// directories exists for it.
func TestRunsAsNobodyUnderHiddenHome(t *testing.T) {
	python, ws, state := hiddenHome(t)
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	dir := wheels.Dir(t)
	cfg := Config{Workspace: ws, StateDir: state, Python: python}
	cfg.Deps.Index = uvenv.IndexSettings{NoIndex: true, FindLinks: []string{dir}, Offline: true}
	eng, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	os.WriteFile(filepath.Join(state, "jobs.db"), []byte("SECRET-JOBS"), 0o600)
	other := filepath.Join(state, "tmp", "run-other")
	os.MkdirAll(other, 0o777)
	os.WriteFile(filepath.Join(other, "x"), []byte("SECRET-OTHER"), 0o644)

	code := `
import os, sys, json, ssl, sqlite3
print("uid", os.getuid())
open("from_run.txt", "w").write("ws")
open(os.path.join(os.environ["TMPDIR"], "t"), "w").write("tmp")
print("tmp-ok")
for name in ["jobs.db", "tmp/run-other/x"]:
    try:
        open(os.path.join(sys.argv[1], name)).read()
        print("READ", name)
    except OSError as e:
        print("denied", name, type(e).__name__)
for p in ["/root/.bashrc", "/root/.ssh"]:
    print("exists", p, os.path.exists(p))
`
	res, err := eng.Run(context.Background(), Request{Code: code, Args: []string{state}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(res.Sandbox, "uid 65534") {
		t.Fatalf("exit %d sandbox %q notes %v stderr %s", res.ExitCode, res.Sandbox, res.SandboxNotes, res.Stderr)
	}
	otherRun := "denied tmp/run-other/x FileNotFoundError"
	if forcedWarm != nil {
		// A warm interpreter's mount namespace binds the whole tmp root
		// (runs' tmp dirs are made after it started); the run's own
		// Landlock layer denies the others.
		otherRun = "denied tmp/run-other/x PermissionError"
	}
	for _, want := range []string{"uid 65534\n", "tmp-ok\n", "denied jobs.db FileNotFoundError", otherRun,
		"exists /root/.bashrc False", "exists /root/.ssh False"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("want %q in stdout:\n%s", want, res.Stdout)
		}
	}
	if strings.Contains(res.Stdout, "READ") {
		t.Errorf("read a hidden file:\n%s", res.Stdout)
	}
	if _, err := os.Stat(filepath.Join(ws, "from_run.txt")); err != nil {
		t.Errorf("workspace write: %v", err)
	}

	// A uv environment (under the hidden state dir, its base interpreter
	// under /root) works too.
	res, err = eng.Run(context.Background(), Request{Code: "import os, pyexec_alpha; print(os.getuid(), pyexec_alpha.__version__)",
		Dependencies: []string{"pyexec-alpha==1.0"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "65534 1.0" {
		t.Errorf("uv env run: exit %d stdout %q stderr %s notes %v", res.ExitCode, res.Stdout, res.Stderr, res.SandboxNotes)
	}
	if p := eng.RunAsPreview(context.Background()); !strings.HasPrefix(p, "nobody (uid 65534") {
		t.Errorf("preview: %s", p)
	}
}

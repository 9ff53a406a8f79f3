package quality

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/testutil/realpkg"
	"github.com/pyexec/pyexec/internal/uvenv"
)

func TestMain(m *testing.M) {
	launcher.MaybeRun()
	os.Exit(m.Run())
}

// newRunner makes an engine on a fresh workspace and state dir whose uv
// shares the machine's test cache (ruff is downloaded once per machine).
func newRunner(t *testing.T, ruff string) (*Runner, string) {
	t.Helper()
	realpkg.UseSharedCache(t)
	ws := t.TempDir()
	eng, err := engine.New(engine.Config{Workspace: ws, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if _, err := eng.Environments().UVPath(); err != nil && ruff == "" {
		t.Skip(err)
	}
	return New(eng, ruff), ws
}

const messy = "import os,sys\nx = {  'a':1 }\ndef f( a ):\n  return eval(a)\n"

func TestFormatAndLint(t *testing.T) {
	r, ws := newRunner(t, "")
	ctx := context.Background()

	f, err := r.Format(ctx, FormatRequest{Source: Source{Code: messy}})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Changed || !strings.Contains(f.Formatted, "x = {\"a\": 1}\n") || !strings.Contains(f.Diff, "+def f(a):") || !strings.Contains(f.RuffVersion, RuffVersion) {
		t.Fatalf("format: %+v", f)
	}
	again, err := r.Format(ctx, FormatRequest{Source: Source{Code: f.Formatted}, Check: true})
	if err != nil || again.Changed || again.Formatted != "" {
		t.Fatalf("check of formatted code: %+v %v", again, err)
	}
	if c, _ := r.Format(ctx, FormatRequest{Source: Source{Code: messy}, Check: true}); !c.Changed || c.Formatted != "" || c.Diff != "" {
		t.Fatalf("check of messy code: %+v", c)
	}
	if n, _ := r.Format(ctx, FormatRequest{Source: Source{Code: "x = [1111111111, 2222222222, 3333333333]\n"}, LineLength: 20}); !strings.Contains(n.Formatted, "[\n") {
		t.Fatalf("line_length 20 not applied: %q", n.Formatted)
	}

	l, err := r.Lint(ctx, LintRequest{Source: Source{Code: messy}, Select: []string{"F", "S"}})
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]Diagnostic{}
	for _, d := range l.Diagnostics {
		rules[d.Rule] = d
	}
	if d := rules["S307"]; d.Line != 4 || d.Column != 10 || d.FixAvailable {
		t.Errorf("S307 (eval, a bandit rule): %+v", d)
	}
	if d := rules["F401"]; d.Line != 1 || !d.FixAvailable {
		t.Errorf("F401 (unused import): %+v", d)
	}
	if l.Count != len(l.Diagnostics) || l.Fixed != "" {
		t.Errorf("lint without fix: %+v", l)
	}
	fx, err := r.Lint(ctx, LintRequest{Source: Source{Code: messy}, Select: []string{"F", "S"}, Fix: true})
	if err != nil || !fx.Changed || strings.Contains(fx.Fixed, "import os") || fx.Remaining != 1 || !strings.Contains(fx.Diff, "-import os,sys") {
		t.Fatalf("lint with fix: %+v %v", fx, err)
	}

	// A syntax error is a finding for lint and a request error for format.
	if _, err := r.Format(ctx, FormatRequest{Source: Source{Code: "def (:\n"}}); !isField(err, "code") || !strings.Contains(err.Error(), "parse") {
		t.Errorf("format of broken code: %v", err)
	}
	if l, err := r.Lint(ctx, LintRequest{Source: Source{Code: "def (:\n"}}); err != nil || l.Count == 0 {
		t.Errorf("lint of broken code: %+v %v", l, err)
	}

	// The tool environment is pinned under its reserved name.
	rec, err := r.eng.Environments().Named(ToolEnv)
	if err != nil || rec.Tool == "" || rec.Requirements[0] != "ruff=="+RuffVersion {
		t.Fatalf("tool env: %+v %v", rec, err)
	}
	_ = ws
}

func TestWorkspaceFilesChangeOnlyWithWrite(t *testing.T) {
	r, ws := newRunner(t, "")
	ctx := context.Background()
	path := filepath.Join(ws, "pkg", "mod.py")
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(messy), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := r.Format(ctx, FormatRequest{Source: Source{ScriptPath: "pkg/mod.py"}})
	if err != nil || !f.Changed || f.Written || f.Path != path || !strings.Contains(f.Diff, "a/pkg/mod.py") {
		t.Fatalf("format: %+v %v", f, err)
	}
	if b, _ := os.ReadFile(path); string(b) != messy {
		t.Fatalf("file changed without write: %q", b)
	}
	l, err := r.Lint(ctx, LintRequest{Source: Source{ScriptPath: "mod.py", Cwd: "pkg", Write: true}, Select: []string{"F401"}, Fix: true})
	if err != nil || !l.Written {
		t.Fatalf("lint --fix write: %+v %v", l, err)
	}
	if b, _ := os.ReadFile(path); strings.Contains(string(b), "import os") {
		t.Fatalf("fix not written: %q", b)
	}
	f, err = r.Format(ctx, FormatRequest{Source: Source{ScriptPath: "pkg/mod.py", Write: true}})
	if err != nil || !f.Written {
		t.Fatalf("format write: %+v %v", f, err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "def f(a):\n    return eval(a)") {
		t.Fatalf("formatted file: %q", b)
	}

	// Only workspace files: outside, through a symlink, or not .py.
	outside := filepath.Join(t.TempDir(), "victim.py")
	os.WriteFile(outside, []byte(messy), 0o644)
	os.Symlink(outside, filepath.Join(ws, "link.py"))
	for _, p := range []string{outside, "link.py", "../x.py", "pkg"} {
		if _, err := r.Format(ctx, FormatRequest{Source: Source{ScriptPath: p, Write: true}}); !isField(err, "script_path") {
			t.Errorf("script_path %q: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != messy {
		t.Fatalf("a file outside the workspace changed: %q", b)
	}
	if _, err := r.Format(ctx, FormatRequest{Source: Source{Code: "x=1", Write: true}}); !isField(err, "write") {
		t.Errorf("write with inline code: %v", err)
	}
}

// A configuration file in the workspace may have been written by a run. It
// is honoured, but ruff reads it confined like a run: a config pointing
// outside the workspace reaches nothing a run could not.
func TestHostileConfigStaysConfined(t *testing.T) {
	r, ws := newRunner(t, "")
	ctx := context.Background()
	secretDir := t.TempDir() // outside the workspace, in /tmp: unreadable for runs
	secret := filepath.Join(secretDir, "ruff.toml")
	os.WriteFile(secret, []byte("line-length = 20 # TOP-SECRET-MARKER\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "ruff.toml"), []byte("extend = \""+secret+"\"\n"), 0o644)
	long := "x = [1111111111, 2222222222, 3333333333]\n"

	f, err := r.Format(ctx, FormatRequest{Source: Source{Code: long}})
	if err == nil {
		if strings.Contains(f.Formatted, "[\n") {
			t.Fatalf("the config outside the workspace was read: %q", f.Formatted)
		}
	} else if strings.Contains(err.Error(), "TOP-SECRET") {
		t.Fatalf("the error leaks the secret: %v", err)
	}
	t.Logf("format with the hostile config: %q", err)
	// isolated ignores the workspace's configuration altogether.
	if f, err := r.Format(ctx, FormatRequest{Source: Source{Code: long, Isolated: true}}); err != nil || f.Changed {
		t.Fatalf("isolated: %+v %v", f, err)
	}
	// The project's own settings apply.
	os.WriteFile(filepath.Join(ws, "ruff.toml"), []byte("line-length = 20\n"), 0o644)
	if f, err := r.Format(ctx, FormatRequest{Source: Source{Code: long}}); err != nil || !strings.Contains(f.Formatted, "[\n") {
		t.Fatalf("project config: %+v %v", f, err)
	}
}

func TestOperatorRuffAndInstallFailure(t *testing.T) {
	r, _ := newRunner(t, "")
	if _, err := r.Format(context.Background(), FormatRequest{Source: Source{Code: "x=1\n"}}); err != nil {
		t.Fatal(err)
	}
	env, release, err := r.eng.Environments().EnsureNamed(context.Background(), ToolEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	release()
	bin := filepath.Join(env.Dir, "bin", "ruff")

	own, _ := newRunner(t, bin)
	if f, err := own.Format(context.Background(), FormatRequest{Source: Source{Code: "x=1\n"}}); err != nil || !f.Changed {
		t.Fatalf("--ruff %s: %+v %v", bin, f, err)
	}
	if _, err := own.eng.Environments().Named(ToolEnv); !errors.Is(err, uvenv.ErrNoNamedEnv) {
		t.Errorf("--ruff still installed the tool env: %v", err)
	}

	// No index to install from: the error says how to provide ruff.
	realpkg.UseSharedCache(t)
	eng, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: t.TempDir(),
		Deps: engine.DepsConfig{Index: uvenv.IndexSettings{NoIndex: true, Offline: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	_, err = New(eng, "").Lint(context.Background(), LintRequest{Source: Source{Code: "x=1\n"}})
	if err == nil || !strings.Contains(err.Error(), "--ruff") || !strings.Contains(err.Error(), RuffVersion) {
		t.Fatalf("install failure: %v", err)
	}
}

func TestRejections(t *testing.T) {
	r, _ := newRunner(t, "/nonexistent/ruff")
	ctx := context.Background()
	for _, tc := range []struct {
		field string
		call  func() error
	}{
		{"code", func() error { _, err := r.Format(ctx, FormatRequest{}); return err }},
		{"script_path", func() error {
			_, err := r.Format(ctx, FormatRequest{Source: Source{Code: "x", ScriptPath: "a.py"}})
			return err
		}},
		{"line_length", func() error {
			_, err := r.Format(ctx, FormatRequest{Source: Source{Code: "x"}, LineLength: 1000})
			return err
		}},
		{"write", func() error {
			_, err := r.Format(ctx, FormatRequest{Source: Source{ScriptPath: "a.py", Write: true}, Check: true})
			return err
		}},
		{"write", func() error {
			_, err := r.Lint(ctx, LintRequest{Source: Source{ScriptPath: "a.py", Write: true}})
			return err
		}},
		{"select", func() error {
			_, err := r.Lint(ctx, LintRequest{Source: Source{Code: "x"}, Select: []string{"F; rm -rf /"}})
			return err
		}},
	} {
		if err := tc.call(); !isField(err, tc.field) {
			t.Errorf("want an error naming %s, got %v", tc.field, err)
		}
	}
}

func isField(err error, field string) bool {
	var re *engine.RequestError
	return errors.As(err, &re) && re.Field == field
}

// BenchmarkFormat is one format_code of a small snippet once ruff is
// installed: a confined run of the driver plus ruff itself.
func BenchmarkFormat(b *testing.B) {
	b.Setenv("UV_CACHE_DIR", realpkg.CacheDir(b))
	eng, err := engine.New(engine.Config{Workspace: b.TempDir(), StateDir: b.TempDir(), Warm: engine.WarmConfig{Spares: 2}})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	r := New(eng, "")
	if _, err := r.Format(context.Background(), FormatRequest{Source: Source{Code: messy}}); err != nil {
		b.Skip(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Format(context.Background(), FormatRequest{Source: Source{Code: messy}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st := eng.WarmStatsIfOn(); st != nil {
		b.Logf("warm %d, cold %d, cold reasons %v", st.Warm, st.Cold, st.ColdReasons)
	}
}

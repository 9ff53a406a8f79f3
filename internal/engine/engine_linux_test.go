package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/testutil/gate"
)

// newTestEngine returns an engine over a fresh workspace and state dir.
func newTestEngine(t *testing.T, mutate ...func(*Config)) (*Engine, string) {
	t.Helper()
	ws := t.TempDir()
	cfg := Config{Workspace: ws, StateDir: t.TempDir()}
	for _, m := range mutate {
		m(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e, e.Config().Workspace
}

func run(t *testing.T, e *Engine, req Request) Result {
	t.Helper()
	res, err := e.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("Run(%+v): %v", req, err)
	}
	return res
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRunOutputIsExact(t *testing.T) {
	e, _ := newTestEngine(t)
	tests := []struct {
		name, code, want string
	}{
		{"quotes and dollars", `print("Hello 'world' with \"quotes\" and $variables")`, "Hello 'world' with \"quotes\" and $variables\n"},
		{"backslashes", `print(r"C:\new\table" + "\\" + '\'')`, `C:\new\table` + `\'` + "\n"},
		{"shell metacharacters", "print('$(rm -rf /) `id` ; | && > < * ? ~ ${HOME}')", "$(rm -rf /) `id` ; | && > < * ? ~ ${HOME}\n"},
		{"emoji and CJK", `print("héllo 🐍 漢字 テスト")`, "héllo 🐍 漢字 テスト\n"},
		{"no trailing newline", `import sys; sys.stdout.write("a\tb")`, "a\tb"},
		{"multi-line program", "def f(x):\n    return x * 2\n\nfor i in range(3):\n    print(f(i))\n", "0\n2\n4\n"},
		{"invalid utf-8 is replaced", `import sys; sys.stdout.buffer.write(b"\xff\xfeok \xc3\n")`, "\uFFFDok \uFFFD\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, e, Request{Code: tt.code})
			if res.Stdout != tt.want || res.ExitCode != 0 || !res.Success {
				t.Fatalf("got stdout %q exit %d stderr %q; want %q", res.Stdout, res.ExitCode, res.Stderr, tt.want)
			}
		})
	}
}

func TestRunArgsAndStdin(t *testing.T) {
	e, ws := newTestEngine(t)
	writeFile(t, filepath.Join(ws, "sub", "echo.py"), "import sys, os\nprint(repr(sys.argv[1:]))\nprint(os.path.basename(__file__), __name__)\nprint(sys.stdin.read().upper(), end='')\n")
	args := []string{"a b", "$HOME", `"dq"`, "'sq'", "", `back\slash`, "--flag", "🐍"}
	res := run(t, e, Request{ScriptPath: "sub/echo.py", Args: args, Stdin: "line one\nline 2\n"})
	want := `['a b', '$HOME', '"dq"', "'sq'", '', 'back\\slash', '--flag', '🐍']` + "\necho.py __main__\nLINE ONE\nLINE 2\n"
	if res.Stdout != want {
		t.Fatalf("stdout = %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}

	// Inline code gets args too, and an empty stdin when none is given.
	res = run(t, e, Request{Code: "import sys; print(sys.argv[1:], repr(sys.stdin.read()))", Args: []string{"x"}})
	if res.Stdout != "['x'] ''\n" {
		t.Fatalf("stdout = %q", res.Stdout)
	}
}

func TestRunExitCodes(t *testing.T) {
	e, _ := newTestEngine(t)
	tests := []struct {
		name       string
		code       string
		exit       int
		stderrHas  string
		wantStdout string
	}{
		{"success", "print('ok')", 0, "", "ok\n"},
		{"sys.exit(3)", "import sys; print('before'); sys.exit(3)", 3, "", "before\n"},
		{"uncaught exception", "raise ValueError('boom')", 1, "ValueError: boom", ""},
		{"syntax error", "def (:", 1, "SyntaxError", ""},
		{"killed by SIGKILL", "import os, signal; print('x', flush=True); os.kill(os.getpid(), signal.SIGKILL)", -9, "", "x\n"},
		{"killed by SIGTERM", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)", -15, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, e, Request{Code: tt.code})
			if res.ExitCode != tt.exit || res.Success != (tt.exit == 0) || res.TimedOut {
				t.Fatalf("exit %d success %v timed_out %v; want exit %d (stderr %q)", res.ExitCode, res.Success, res.TimedOut, tt.exit, res.Stderr)
			}
			if !strings.Contains(res.Stderr, tt.stderrHas) || res.Stdout != tt.wantStdout {
				t.Fatalf("stdout %q stderr %q; want stdout %q and stderr containing %q", res.Stdout, res.Stderr, tt.wantStdout, tt.stderrHas)
			}
		})
	}
}

// processGone reports whether pid no longer exists (it has been reaped).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// newMark returns a string unique to the test, for a run to put in its
// processes' command lines: a run's pids are those of its own PID
// namespace, so leftovers are found by what they carry.
func newMark(t *testing.T) string {
	return fmt.Sprintf("pyexec-mark-%d-%s", os.Getpid(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
}

// marked lists live processes whose command line holds mark.
func marked(mark string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); strings.Contains(string(cmd), mark) {
			out = append(out, pid)
		}
	}
	return out
}

var pidLine = regexp.MustCompile(`(?m)^pid:(\d+)$`)

func pidsIn(t *testing.T, s string) []int {
	t.Helper()
	var pids []int
	for _, m := range pidLine.FindAllStringSubmatch(s, -1) {
		n, _ := strconv.Atoi(m[1])
		pids = append(pids, n)
	}
	return pids
}

// pidObserver records the pid (in the server's PID namespace) a run starts with.
type pidObserver struct{ pid atomic.Int64 }

func (o *pidObserver) Started(pid int)           { o.pid.Store(int64(pid)) }
func (o *pidObserver) Output(s Stream, p []byte) {}

// A grandchild that leaves the process group with setsid() must still die
// with the run: on timeout and when the main process exits normally.
func TestRunKillsWholeTree(t *testing.T) {
	e, _ := newTestEngine(t)
	daemon := `
import os, sys, time
r, w = os.pipe()
def spawn():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:          # double fork: orphaned grandchild
            sys.stdout.write(f"pid:{os.getpid()}\n")  # one write: lines never interleave
            sys.stdout.flush()
            os.write(w, b"x")
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(1000)", sys.argv[1]])
        os._exit(0)
spawn()
os.read(r, 1)  # the grandchild is on its way
sys.stdout.write(f"pid:{os.getpid()}\n")
`
	t.Run("timeout", func(t *testing.T) {
		mark := newMark(t)
		obs := &pidObserver{}
		res, err := e.Run(context.Background(), Request{Code: daemon + "sys.stdout.write('partial\\n')\ntime.sleep(1000)\n", Timeout: 1, Args: []string{mark}}, obs)
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.Success || res.ExitCode >= 0 {
			t.Fatalf("timed_out %v success %v exit %d; want a killed, timed-out run", res.TimedOut, res.Success, res.ExitCode)
		}
		if !strings.Contains(res.Stdout, "partial\n") {
			t.Fatalf("partial output lost: %q", res.Stdout)
		}
		if !regexp.MustCompile(`\[TIMEOUT\] killed after [0-9.]+s \(timeout 1s\)`).MatchString(lastLine(res.Stderr)) {
			t.Fatalf("stderr does not end with a [TIMEOUT] line: %q", res.Stderr)
		}
		if pids := pidsIn(t, res.Stdout); len(pids) != 2 {
			t.Fatalf("want 2 pids in %q", res.Stdout)
		}
		if left := marked(mark); len(left) > 0 {
			t.Errorf("processes %v outlived the run", left)
		}
		if pid := int(obs.pid.Load()); pid == 0 || !processGone(pid) {
			t.Errorf("the run's main process (%d) outlived it", pid)
		}
	})
	t.Run("normal exit leaves no daemon", func(t *testing.T) {
		mark := newMark(t)
		res := run(t, e, Request{Code: daemon, Args: []string{mark}})
		if res.ExitCode != 0 || res.TimedOut {
			t.Fatalf("exit %d timed_out %v stderr %q", res.ExitCode, res.TimedOut, res.Stderr)
		}
		if pids := pidsIn(t, res.Stdout); len(pids) != 2 {
			t.Fatalf("want 2 pids in %q", res.Stdout)
		}
		if left := marked(mark); len(left) > 0 {
			t.Errorf("daemons %v outlived the run", left)
		}
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// startObserver signals when a run has printed a given marker.
type startObserver struct {
	once   sync.Once
	marker string
	buf    strings.Builder
	mu     sync.Mutex
	seen   chan struct{}
}

func (o *startObserver) Started(int) {}
func (o *startObserver) Output(_ Stream, p []byte) {
	o.mu.Lock()
	o.buf.Write(p)
	hit := strings.Contains(o.buf.String(), o.marker)
	o.mu.Unlock()
	if hit {
		o.once.Do(func() { close(o.seen) })
	}
}

func TestRunCancelKillsTree(t *testing.T) {
	e, _ := newTestEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := &startObserver{marker: "ready", seen: make(chan struct{})}
	mark := newMark(t)
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := e.Run(ctx, Request{Code: "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)', sys.argv[1]])\nprint('ready', flush=True)\ntime.sleep(1000)", Timeout: 60, Args: []string{mark}}, obs)
		done <- outcome{res, err}
	}()
	<-obs.seen
	cancel()
	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	if out.res.Success || !strings.Contains(out.res.Stderr, "[CANCELLED]") || !strings.Contains(out.res.Stdout, "ready") {
		t.Fatalf("cancelled run: %+v", out.res)
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("processes %v outlived the cancelled run", left)
	}
}

func TestRunTimeoutIsCappedByServerMaximum(t *testing.T) {
	e, _ := newTestEngine(t, func(c *Config) { c.MaxTimeout = time.Second })
	res := run(t, e, Request{Code: "import time; time.sleep(1000)", Timeout: 3600})
	if !res.TimedOut {
		t.Fatalf("a 3600 s timeout was not capped to the 1 s maximum: %+v", res)
	}
}

// A script printing 200 MB must not make the server hold 200 MB: only the
// inline cap is kept, head and tail, with exact totals.
func TestRunOutputFloodKeepsMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("floods 200 MB through a pipe")
	}
	e, _ := newTestEngine(t)
	const total = 200 << 20
	code := fmt.Sprintf(`import sys
w = sys.stdout.buffer.write
w(b"HEAD\n")
chunk = b"x" * 1048575 + b"\n"
for _ in range(%d): w(chunk)
w(b"TAIL\n")
sys.stderr.write("done\n")
`, total>>20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := run(t, e, Request{Code: code, Timeout: 120})
	runtime.ReadMemStats(&after)

	if res.StdoutBytes != total+10 || !res.StdoutTruncated {
		t.Fatalf("stdout_bytes %d truncated %v; want %d and truncated", res.StdoutBytes, res.StdoutTruncated, total+10)
	}
	if !strings.HasPrefix(res.Stdout, "HEAD\n") || !strings.HasSuffix(res.Stdout, "TAIL\n") || !strings.Contains(res.Stdout, "bytes truncated") {
		t.Fatalf("head, tail or truncation marker missing (len %d)", len(res.Stdout))
	}
	if len(res.Stdout) > DefaultOutputCap+200 {
		t.Fatalf("inline stdout is %d bytes; the cap is %d", len(res.Stdout), DefaultOutputCap)
	}
	if res.Stderr != "done\n" || res.StderrTruncated {
		t.Fatalf("stderr %q", res.Stderr)
	}
	// Everything the server allocated while 200 MB streamed through it.
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("relaying %d MB allocated %.1f MB in the server; heap in use after: %.1f MB", total>>20, float64(grew)/(1<<20), float64(after.HeapInuse)/(1<<20))
	if grew > 32<<20 {
		t.Fatalf("server allocated %d MB while relaying a 200 MB flood", grew>>20)
	}
}

func TestRunEnvironment(t *testing.T) {
	t.Setenv("PYEXEC_TEST_SECRET", "server-secret")
	printEnv := `import os, json
print(json.dumps({k: os.environ.get(k) for k in ["PYEXEC_TEST_SECRET", "LANG", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "A", "B", "C", "HOME_COPY", "MULTI", "LIT"]}))`

	e, ws := newTestEngine(t)
	writeFile(t, filepath.Join(ws, ".env"), `# comment
export A=from_file
B="file b"   # overridden by env_vars
HOME_COPY=${HOME}
MULTI="line1
line2"
LIT='${A} stays'
`)
	res := run(t, e, Request{Code: printEnv, EnvFile: ".env", EnvVars: map[string]string{"B": "from vars", "C": "c"}})
	home, _ := os.UserHomeDir()
	want := fmt.Sprintf(`{"PYEXEC_TEST_SECRET": null, "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8", "A": "from_file", "B": "from vars", "C": "c", "HOME_COPY": %q, "MULTI": "line1\nline2", "LIT": "${A} stays"}`+"\n", home)
	if res.Stdout != want {
		t.Fatalf("env:\n got %s\nwant %s", res.Stdout, want)
	}

	inherit, _ := newTestEngine(t, func(c *Config) { c.InheritEnv = true })
	res = run(t, inherit, Request{Code: "import os; print(os.environ['PYEXEC_TEST_SECRET'])"})
	if res.Stdout != "server-secret\n" {
		t.Fatalf("--inherit-env: stdout %q", res.Stdout)
	}
}

func TestRunTempDirIsPrivateAndRemoved(t *testing.T) {
	e, _ := newTestEngine(t)
	res := run(t, e, Request{Code: "import os, tempfile\nd = os.environ['TMPDIR']\nopen(os.path.join(d, 'f'), 'w').write('x')\nprint(d)\nprint(tempfile.gettempdir() == d)"})
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 2 || lines[1] != "True" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	e.settle() // removal happens after the result is out
	if _, err := os.Stat(lines[0]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("run temp dir %s still exists after the run (err %v)", lines[0], err)
	}
}

func TestRunUsesVenvOfCwd(t *testing.T) {
	e, ws := newTestEngine(t)
	base, err := e.DefaultInterpreter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(ws, "proj")
	if out, err := exec.Command(base.Path, "-m", "venv", "--without-pip", filepath.Join(proj, ".venv")).CombinedOutput(); err != nil {
		t.Fatalf("create venv: %v: %s", err, out)
	}
	res := run(t, e, Request{Code: "import sys; print(sys.prefix != sys.base_prefix)", Cwd: "proj"})
	if res.Stdout != "True\n" || res.ExecutionStrategy != StrategyVenv || res.Executable != filepath.Join(proj, ".venv", "bin", "python") {
		t.Fatalf("stdout %q strategy %q executable %q", res.Stdout, res.ExecutionStrategy, res.Executable)
	}
	// Outside that directory the default interpreter is used.
	res = run(t, e, Request{Code: "print(1)"})
	if res.ExecutionStrategy != StrategySystem || res.Executable != base.Path {
		t.Fatalf("strategy %q executable %q", res.ExecutionStrategy, res.Executable)
	}
	// An explicit interpreter wins over the .venv.
	res = run(t, e, Request{Code: "print(1)", Cwd: "proj", Python: base.Path})
	if res.Executable != base.Path {
		t.Fatalf("explicit python ignored: executable %q", res.Executable)
	}
}

func TestRunPythonVersionSelection(t *testing.T) {
	e, _ := newTestEngine(t)
	ctx := context.Background()
	def, err := e.DefaultInterpreter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(def.Path, "/shims/python3") || !filepath.IsAbs(def.Path) {
		t.Fatalf("default interpreter %q is a shim or relative", def.Path)
	}
	var other *Interpreter
	for _, it := range e.Interpreters(ctx) {
		if minor(it.Version) != minor(def.Version) && compareVersions(it.Version, "3.8") >= 0 {
			other = &it
			break
		}
	}
	if other == nil {
		t.Skip("only one Python minor version is installed")
	}
	want := minor(other.Version)
	res := run(t, e, Request{Code: "import sys; print('%d.%d' % sys.version_info[:2])", PythonVersion: want})
	if res.Stdout != want+"\n" || !strings.HasPrefix(res.PythonVersionUsed, want+".") {
		t.Fatalf("python_version %s: stdout %q used %q", want, res.Stdout, res.PythonVersionUsed)
	}
	if strings.Contains(res.Executable, "/shims/") {
		t.Fatalf("executed a pyenv shim: %s", res.Executable)
	}
}

func minor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

func TestRejectedRequests(t *testing.T) {
	e, ws := newTestEngine(t)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "evil.py"), "print('escaped')")
	writeFile(t, filepath.Join(outside, ".env"), "SECRET=1")
	writeFile(t, filepath.Join(ws, "ok.py"), "print('ok')")
	writeFile(t, filepath.Join(ws, "notes.txt"), "x")
	if err := os.Mkdir(filepath.Join(ws, "dir.py"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link.py":     filepath.Join(outside, "evil.py"),
		"linkdir":     outside,
		"env.link":    filepath.Join(outside, ".env"),
		"dangling.py": filepath.Join(outside, "missing.py"),
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("#", DefaultCodeLimit+1)

	tests := []struct {
		name    string
		req     Request
		field   string
		message string
	}{
		{"neither code nor script", Request{}, "code", "give one of"},
		{"both code and script", Request{Code: "1", ScriptPath: "ok.py"}, "code", "not both"},
		{"code over 1 MiB", Request{Code: big}, "code", "the limit is 1 MiB"},
		{"negative timeout", Request{Code: "1", Timeout: -1}, "timeout", "must be 0 or more"},
		{"NaN timeout", Request{Code: "1", Timeout: math.NaN()}, "timeout", "finite number of seconds"},
		{"NUL in an argument", Request{Code: "1", Args: []string{"ok", "a\x00b"}}, "args", "argument 1 contains a NUL byte"},
		{"argument too long", Request{Code: "1", Args: []string{strings.Repeat("a", MaxArgBytes+1)}}, "args", "the limit is 128 KiB per argument"},
		{"arguments too long", Request{Code: "1", Args: []string{strings.Repeat("a", 100<<10), strings.Repeat("b", 100<<10), strings.Repeat("c", 100<<10)}}, "args", "the limit is 256 KiB in all"},
		{"stdin over 1 MiB", Request{Code: "1", Stdin: strings.Repeat("s", MaxStdinBytes+1)}, "stdin", "the limit is 1 MiB"},
		{"env vars too large", Request{Code: "1", EnvVars: map[string]string{"A": strings.Repeat("v", MaxEnvBytes)}}, "env_vars", "the limit is 256 KiB in all"},
		{"env var name empty", Request{Code: "1", EnvVars: map[string]string{"": "x"}}, "env_vars", "invalid variable name"},
		{"NUL in cwd", Request{Code: "1", Cwd: "a\x00"}, "cwd", "NUL"},
		{"NUL in env_file", Request{Code: "1", EnvFile: ".env\x00"}, "env_file", "NUL"},
		{"NUL in python", Request{Code: "1", Python: "/usr/bin/python3\x00"}, "python", "NUL"},
		{"path too long", Request{Code: "1", Cwd: strings.Repeat("d/", MaxPathBytes)}, "cwd", "the limit is 4096"},
		{"sandbox unknown, said once", Request{Code: "1", Sandbox: "bogus"}, "sandbox", "unknown policy"},
		{"too many dependencies", Request{Code: "1", Dependencies: make([]string, MaxDependencies+1)}, "dependencies", "the limit is 256"},
		{"dot-dot escape", Request{ScriptPath: "../" + filepath.Base(outside) + "/evil.py"}, "script_path", "outside the workspace"},
		{"deep dot-dot escape", Request{ScriptPath: "a/../../../../../../etc/x.py"}, "script_path", "outside the workspace"},
		{"absolute path outside", Request{ScriptPath: filepath.Join(outside, "evil.py")}, "script_path", "outside the workspace"},
		{"symlinked file outside", Request{ScriptPath: "link.py"}, "script_path", "through a symlink"},
		{"through symlinked dir", Request{ScriptPath: "linkdir/evil.py"}, "script_path", "through a symlink"},
		{"dangling symlink", Request{ScriptPath: "dangling.py"}, "script_path", "does not exist"},
		{"not a .py file", Request{ScriptPath: "notes.txt"}, "script_path", "not a .py file"},
		{"directory named .py", Request{ScriptPath: "dir.py"}, "script_path", "not a regular file"},
		{"missing script", Request{ScriptPath: "nope.py"}, "script_path", "does not exist"},
		{"NUL in path", Request{ScriptPath: "ok\x00.py"}, "script_path", "NUL"},
		{"cwd escape", Request{Code: "1", Cwd: ".."}, "cwd", "outside the workspace"},
		{"cwd absolute outside", Request{Code: "1", Cwd: "/"}, "cwd", "outside the workspace"},
		{"cwd through symlink", Request{Code: "1", Cwd: "linkdir"}, "cwd", "through a symlink"},
		{"cwd is a file", Request{Code: "1", Cwd: "ok.py"}, "cwd", "not a directory"},
		{"env_file outside", Request{Code: "1", EnvFile: filepath.Join(outside, ".env")}, "env_file", "outside the workspace"},
		{"env_file through symlink", Request{Code: "1", EnvFile: "env.link"}, "env_file", "through a symlink"},
		{"env var name with =", Request{Code: "1", EnvVars: map[string]string{"A=B": "x"}}, "env_vars", "invalid variable name"},
		{"env var value with NUL", Request{Code: "1", EnvVars: map[string]string{"A": "x\x00"}}, "env_vars", "NUL"},
		{"python not absolute", Request{Code: "1", Python: "python3"}, "python", "absolute path"},
		{"python not an interpreter", Request{Code: "1", Python: "/bin/false"}, "python", "not a working Python"},
		{"python_version malformed", Request{Code: "1", PythonVersion: "three"}, "python_version", "not a version"},
		{"python_version not installed", Request{Code: "1", PythonVersion: "2.5"}, "python_version", "not installed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Validate (used before queueing a job) and Run reject alike.
			for name, err := range map[string]error{
				"Run":      func() error { _, err := e.Run(context.Background(), tt.req, nil); return err }(),
				"Validate": e.Validate(context.Background(), tt.req),
			} {
				var re *RequestError
				if !errors.As(err, &re) {
					t.Fatalf("%s: err = %v; want a RequestError", name, err)
				}
				if strings.Contains(re.Error(), "sandbox: sandbox:") || strings.HasPrefix(re.Message, re.Field+": ") {
					t.Fatalf("%s: a doubled prefix: %q", name, re.Error())
				}
				if re.Field != tt.field || !strings.Contains(re.Message, tt.message) {
					t.Fatalf("%s: err = %q (field %q); want field %q and message containing %q", name, re.Error(), re.Field, tt.field, tt.message)
				}
			}
		})
	}
}

func TestScriptPathInsideWorkspaceRuns(t *testing.T) {
	e, ws := newTestEngine(t)
	writeFile(t, filepath.Join(ws, "pkg", "main.py"), "import os, sys\nprint(os.getcwd() == sys.argv[1])\nprint(os.path.dirname(__file__) == sys.path[0])")
	if err := os.Symlink(filepath.Join(ws, "pkg", "main.py"), filepath.Join(ws, "alias.py")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ script, cwd string }{
		{"pkg/main.py", ""},
		{"main.py", "pkg"},
		{filepath.Join(ws, "pkg", "main.py"), ""},
		{"alias.py", ""},           // a symlink that stays inside is fine
		{"pkg/../pkg/main.py", ""}, // so is .. that stays inside
	} {
		cwd := ws
		if tt.cwd != "" {
			cwd = filepath.Join(ws, tt.cwd)
		}
		res := run(t, e, Request{ScriptPath: tt.script, Cwd: tt.cwd, Args: []string{cwd}})
		if res.Stdout != "True\nTrue\n" {
			t.Errorf("%s (cwd %q): stdout %q stderr %q", tt.script, tt.cwd, res.Stdout, res.Stderr)
		}
	}
}

func TestObserverSeesOutputAsItComes(t *testing.T) {
	e, _ := newTestEngine(t)
	obs := &startObserver{marker: "first", seen: make(chan struct{})}
	// The script waits for a file the test creates only after the observer
	// saw the first line: output must be streamed, not delivered at exit.
	gateFile := gate.Path(t)
	code := fmt.Sprintf("import os, time\nprint('first', flush=True)\nwhile not os.path.exists(%q): time.sleep(0.01)\nprint('second')", gateFile)
	done := make(chan Result, 1)
	go func() {
		res, _ := e.Run(context.Background(), Request{Code: code, Timeout: 60}, obs)
		done <- res
	}()
	<-obs.seen
	writeFile(t, gateFile, "")
	if res := <-done; res.Stdout != "first\nsecond\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
}

func TestConcurrentRunsAreIndependent(t *testing.T) {
	e, _ := newTestEngine(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Run(context.Background(), Request{Code: "import sys; print(sys.argv[1])", Args: []string{strconv.Itoa(i)}}, nil)
			if err != nil || res.Stdout != strconv.Itoa(i)+"\n" {
				errs <- fmt.Errorf("run %d: %q %v", i, res.Stdout, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestUsageIsMeasured(t *testing.T) {
	e, _ := newTestEngine(t)
	res := run(t, e, Request{Code: "b = bytearray(64 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nx = sum(range(3_000_000))"})
	if res.PeakRSSBytes < 64<<20 || res.CPUUserSeconds+res.CPUSystemSeconds <= 0 {
		t.Fatalf("peak_rss_bytes %d cpu %g+%g; want >= 64 MiB and some CPU", res.PeakRSSBytes, res.CPUUserSeconds, res.CPUSystemSeconds)
	}
}

// TestHugeTimeoutIsACap: a timeout of 1e10 seconds (which once wrapped to a
// negative duration and killed the run at once) is the server's maximum.
func TestHugeTimeoutIsACap(t *testing.T) {
	e, _ := newTestEngine(t, func(c *Config) { c.MaxTimeout = 5 * time.Second })
	for _, timeout := range []float64{1e10, 1e300} {
		res, err := e.Run(context.Background(), Request{Code: "import time; time.sleep(0.2); print('ran')", Timeout: timeout}, nil)
		if err != nil || res.TimedOut || res.Stdout != "ran\n" {
			t.Fatalf("timeout %g: %+v %v", timeout, res, err)
		}
	}
}

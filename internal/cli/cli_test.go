package cli

import (
	"bytes"
	"context"
	"fmt"
	"github.com/pyexec/pyexec/internal/testutil/mounts"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/buildinfo"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/launcher"
)

// TestMain makes this test binary behave as the pyexec binary when asked to,
// so end-to-end tests run the real CLI as a subprocess without a go build.
func TestMain(m *testing.M) {
	launcher.MaybeRun()
	if os.Getenv("PYEXEC_TEST_AS_CLI") == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// pyexec returns a command running the CLI with args in a fresh workspace
// and state dir.
func pyexec(t *testing.T, workspace string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	state := t.TempDir()
	mounts.CleanupWaitsFor(t, state)
	cmd.Env = append(os.Environ(), "PYEXEC_TEST_AS_CLI=1", "PYEXEC_WORKSPACE="+workspace, "PYEXEC_STATE_DIR="+state)
	return cmd
}

func TestMCPOverStdioEndToEnd(t *testing.T) {
	ws := t.TempDir()
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: pyexec(t, ws, "mcp", "--log-level", "error")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) < 3 {
		t.Fatalf("tools: %d", len(tools.Tools))
	}
	// A script that prints to stdout must not corrupt the JSON-RPC stream.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{
		"code": `print("Hello 'world' with \"quotes\" and $variables")`,
	}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if out["stdout"] != "Hello 'world' with \"quotes\" and $variables\n" || out["exit_code"] != 0.0 {
		t.Fatalf("structured content %v", res.StructuredContent)
	}
}

func TestRunCommand(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "hello.py"), []byte("import sys\nprint('hello', sys.argv[1:])\nprint('to stderr', file=sys.stderr)\nsys.exit(int(sys.argv[1]) if sys.argv[1:] else 0)\n"), 0o644)
	tests := []struct {
		name      string
		args      []string
		env       []string
		stdin     string
		exit      int
		stdout    string
		stderrHas string
	}{
		{"inline code", []string{"run", "-c", "print(1+1)"}, nil, "", 0, "2\n", ""},
		{"file with args and exit code", []string{"run", "hello.py", "3"}, nil, "", 3, "hello ['3']\n", "to stderr"},
		{"flags after file, args after --", []string{"run", "hello.py", "--timeout", "5", "--", "0", "-x"}, nil, "", 0, "hello ['0', '-x']\n", ""},
		{"piped stdin", []string{"run", "-c", "import sys; print(sys.stdin.read()[::-1])"}, nil, "abc", 0, "cba\n", ""},
		{"env flag", []string{"run", "--env", "A=b c", "-c", "import os; print(os.environ['A'])"}, nil, "", 0, "b c\n", ""},
		{"timeout exits 124", []string{"run", "--timeout", "1", "-c", "import time; print('x', flush=True); time.sleep(60)"}, nil, "", 124, "x\n", "[TIMEOUT]"},
		{"timeout from PYEXEC_TIMEOUT", []string{"run", "-c", "import time; time.sleep(60)"}, []string{"PYEXEC_TIMEOUT=1"}, "", 124, "", "[TIMEOUT]"},
		{"killed by signal exits 128+N", []string{"run", "-c", "import os; os.kill(os.getpid(), 9)"}, nil, "", 137, "", ""},
		{"rejected request exits 2", []string{"run", "../outside.py"}, nil, "", 2, "", "outside the workspace"},
		{"bad env value names the variable", []string{"run", "-c", "1"}, []string{"PYEXEC_TIMEOUT=soon"}, "", 2, "", "PYEXEC_TIMEOUT"},
		{"timeout 0 is refused", []string{"run", "--timeout", "0", "-c", "1"}, nil, "", 2, "", "must be more than 0 seconds (leave the flag out for the default)"},
		{"negative timeout is refused", []string{"run", "--timeout", "-1", "-c", "1"}, nil, "", 2, "", "must be more than 0 seconds"},
		{"NaN timeout is refused", []string{"run", "--timeout", "NaN", "-c", "1"}, nil, "", 2, "", "want a number of seconds"},
		{"endless timeout is refused", []string{"run", "--timeout", "1e300", "-c", "1"}, nil, "", 2, "", "more than pyexec can wait"},
		{"size past int64 is refused", []string{"run", "--memory-limit", "99999999999G", "-c", "1"}, nil, "", 2, "", "more than 8 EiB"},
		{"PYEXEC_C is not read", []string{"run", "hello.py"}, []string{"PYEXEC_C=print('not this')"}, "", 0, "hello []\n", ""},
		{"nothing to run", []string{"run"}, nil, "", 2, "", "give -c CODE or a FILE"},
		{"version", []string{"version"}, nil, "", 0, buildinfo.Read().String() + "\n", ""},
		{"help", []string{"run", "--help"}, nil, "", 0, "", "PYEXEC_WORKSPACE"},
		{"unknown command", []string{"frobnicate"}, nil, "", 2, "", "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := pyexec(t, ws, tt.args...)
			cmd.Dir = ws
			cmd.Env = append(cmd.Env, tt.env...)
			cmd.Stdin = strings.NewReader(tt.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.exit || stdout.String() != tt.stdout || !strings.Contains(stderr.String(), tt.stderrHas) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout %q stderr containing %q", code, stdout.String(), stderr.String(), tt.exit, tt.stdout, tt.stderrHas)
			}
		})
	}
}

// TestHelp: each command's help lists the flags it takes as they are
// typed, with their environment variables, and sizes as they are typed.
func TestHelp(t *testing.T) {
	for _, c := range []struct {
		cmd      string
		has, not []string
	}{
		{"run", []string{"\n  -c\n", "\n  --timeout\n", "[$PYEXEC_TIMEOUT]", "(default 2GiB)", "\n  --cwd\n        working directory of the run, inside the workspace\n"},
			[]string{"--c\n", "--warm", "--preload", "--max-workers", "--output-cap", "PYEXEC_C]", "PYEXEC_CWD", "--max-timeout"}},
		{"serve", []string{"--token-file", "--max-body-memory", "(default 64MiB)", "--output-cap", "(default 1MiB)", "--job-timeout", "(default 3600)"},
			[]string{"\n  --token\n"}},
		{"mcp", []string{"--token-file", "--warm", "--sync-budget", "(0: never hand off)"}, []string{"\n  --token\n"}},
	} {
		var stderr bytes.Buffer
		cmd := pyexec(t, t.TempDir(), c.cmd, "--help")
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s --help: %v", c.cmd, err)
		}
		for _, want := range c.has {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("%s --help lacks %q", c.cmd, want)
			}
		}
		for _, bad := range c.not {
			if strings.Contains(stderr.String(), bad) {
				t.Errorf("%s --help has %q", c.cmd, bad)
			}
		}
	}
}

// TestTimeFlags: one rule for every time flag: negative, NaN and 0 are
// refused, except that 0 turns off what can be off.
func TestTimeFlags(t *testing.T) {
	for _, c := range []struct {
		value, zeroMeans string
		want             time.Duration
		err              string
	}{
		{"30", "", 30 * time.Second, ""},
		{"0.25", "", 250 * time.Millisecond, ""},
		{"0", "", 0, "must be more than 0 seconds"},
		{"0", "no time limit", 0, ""},
		{"-1", "no time limit", 0, "must be 0 (no time limit) or more seconds"},
		{"-1", "", 0, "must be more than 0 seconds"},
		{"NaN", "", 0, "want a number"},
		{"+Inf", "x", 0, "want a number"},
		{"1e9", "", 1e9 * time.Second, ""},
		{"1e10", "", 0, "more than pyexec can wait"},
	} {
		f := secondsFlag{zeroMeans: c.zeroMeans}
		err := f.Set(c.value)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Set(%q) zero=%q: %v, want %q", c.value, c.zeroMeans, err, c.err)
			}
			continue
		}
		if err != nil || f.d != c.want {
			t.Errorf("Set(%q) = %v %v, want %v", c.value, f.d, err, c.want)
		}
	}
}

func TestDoctor(t *testing.T) {
	cmd := pyexec(t, t.TempDir(), "doctor")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"workspace", "state dir", "uv", "default python", "interpreters", "timeout"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}

// When the server is killed outright (SIGKILL, no chance to clean up), the
// kernel tells each run's launcher (parent-death signal) and the launcher
// takes the run's whole tree down, setsid grandchildren included.
func TestServerDeathKillsRuns(t *testing.T) {
	ws := t.TempDir()
	ctx := context.Background()
	cmd := pyexec(t, ws, "mcp", "--log-level", "error")
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// A run's pids are those of its own PID namespace: its processes are
	// found by a mark in their command lines.
	mark := fmt.Sprintf("pyexec-mark-%d-server-death", os.Getpid())
	code := fmt.Sprintf(`import os, subprocess, sys, time
if os.fork() == 0:
    os.setsid()
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", %q])
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", %q])
time.sleep(600)
`, mark, mark)
	go cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code, "timeout": 600}})
	waitFor(t, func() bool { return len(markedProcesses(mark)) == 2 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(markedProcesses(mark)) == 0 })
}

// markedProcesses lists live processes whose command line holds mark.
func markedProcesses(mark string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); strings.Contains(string(cmd), mark) {
			out = append(out, pid)
		}
	}
	return out
}

// waitFor polls cond until it holds, failing after 15 s. It is for states
// another process reaches on its own, with no event the test can wait on.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 15 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

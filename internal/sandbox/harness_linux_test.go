package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/testutil/hostile"
)

// The test binary doubles as a miniature launcher (what internal/launcher
// does for real): re-executed with PYEXEC_SANDBOX_TEST_LAUNCHER=1 it reads a
// Spec from the environment, becomes a child subreaper, calls Prepare and
// Start, reaps everything, calls Finish and writes the Report to a file.

const (
	envLauncher = "PYEXEC_SANDBOX_TEST_LAUNCHER"
	envSpec     = "PYEXEC_SANDBOX_TEST_SPEC"
	envReport   = "PYEXEC_SANDBOX_TEST_REPORT"
	envTimeout  = "PYEXEC_SANDBOX_TEST_TIMEOUT_MS"
)

type launcherReport struct {
	Report   Report `json:"report"`
	Exit     int    `json:"exit"`
	Signal   int    `json:"signal"`
	TimedOut bool   `json:"timed_out"`
	StartErr string `json:"start_err,omitempty"`
}

func TestMain(m *testing.M) {
	if os.Getenv(envLauncher) == "1" {
		os.Exit(testLauncherMain())
	}
	os.Exit(m.Run())
}

func testLauncherMain() int {
	var out launcherReport
	write := func() int {
		b, _ := json.Marshal(out)
		_ = os.WriteFile(os.Getenv(envReport), b, 0o600)
		return 0
	}
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	spec, err := UnmarshalSpec([]byte(os.Getenv(envSpec)))
	if err != nil {
		out.StartErr = err.Error()
		return write()
	}
	argv := os.Args[1:]
	reachFailForTest = strings.HasPrefix(spec.RunID, "test-reachfail-")
	r, err := Prepare(spec)
	if err != nil {
		out.StartErr = err.Error()
		return write()
	}
	env := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + spec.Workspace}
	if spec.TmpDir != "" {
		env = append(env, "TMPDIR="+spec.TmpDir)
	}
	pid, err := r.Start(argv[0], argv, &syscall.ProcAttr{
		Dir:   spec.Workspace,
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		out.StartErr = err.Error()
		r.Close()
		return write()
	}
	// Timeout: TERM to the group and the cgroup, a short grace, then KILL,
	// as the real launcher does.
	stop := make(chan struct{})
	timerDone := make(chan struct{})
	timedOut := false
	go func() {
		defer close(timerDone)
		ms, _ := strconv.Atoi(os.Getenv(envTimeout))
		if ms <= 0 {
			<-stop
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(ms) * time.Millisecond):
		}
		timedOut = true
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		r.Signal(syscall.SIGTERM)
		select {
		case <-stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		r.Signal(syscall.SIGKILL)
	}()
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	for {
		_, err := syscall.Wait4(pid, &ws, 0, &ru)
		if err != syscall.EINTR {
			break
		}
	}
	close(stop)
	<-timerDone
	out.TimedOut = timedOut
	// Python is gone: kill the rest of its tree (what the real launcher
	// does with its subreaper bookkeeping), then let Finish sweep the cgroup.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	out.Report = r.Finish(ws, float64(ru.Utime.Sec+ru.Stime.Sec)+float64(ru.Utime.Usec+ru.Stime.Usec)/1e6)
	for {
		var w syscall.WaitStatus
		p, err := syscall.Wait4(-1, &w, syscall.WNOHANG, nil)
		if p <= 0 || err != nil {
			break
		}
	}
	if ws.Signaled() {
		out.Signal = int(ws.Signal())
		out.Exit = -int(ws.Signal())
	} else {
		out.Exit = ws.ExitStatus()
	}
	return write()
}

type runResult struct {
	launcherReport
	RunID           string
	Stdout, Stderr  string
	StdoutBytes     int64
	StdoutTruncated bool
}

var runCounter atomic.Int64

// sandboxed runs argv through the miniature launcher with spec.
func sandboxed(t *testing.T, spec Spec, timeout time.Duration, argv ...string) runResult {
	t.Helper()
	return sandboxedT(t, spec, timeout, 0, argv...)
}

// sandboxedT is sandboxed with a run timeout enforced by the launcher.
func sandboxedT(t *testing.T, spec Spec, timeout, runTimeout time.Duration, argv ...string) runResult {
	t.Helper()
	if spec.RunID == "" {
		spec.RunID = fmt.Sprintf("test-%d-%d", os.Getpid(), runCounter.Add(1))
	}
	b, err := spec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rep := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(os.Args[0], argv...)
	cmd.Env = append(os.Environ(), envLauncher+"=1", envSpec+"="+string(b), envReport+"="+rep)
	if runTimeout > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", envTimeout, runTimeout.Milliseconds()))
	}
	var so, se capWriter
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		t.Fatalf("launcher timed out after %v; stderr=%q", timeout, se.String())
	}
	var res runResult
	raw, err := os.ReadFile(rep)
	if err != nil {
		t.Fatalf("no report: %v; stderr=%q", err, se.String())
	}
	if err := json.Unmarshal(raw, &res.launcherReport); err != nil {
		t.Fatal(err)
	}
	res.Stdout, res.Stderr = so.String(), se.String()
	res.RunID = spec.RunID
	res.StdoutBytes, res.StdoutTruncated = so.n, so.n > int64(len(so.buf))
	return res
}

// capWriter keeps the first 1 MiB and counts the rest (an output flood must
// not blow up the test's memory).
type capWriter struct {
	mu  sync.Mutex
	buf []byte
	n   int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += int64(len(p))
	if room := (1 << 20) - len(w.buf); room > 0 {
		if room > len(p) {
			room = len(p)
		}
		w.buf = append(w.buf, p[:room]...)
	}
	return len(p), nil
}

func (w *capWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// env is a test fixture: a workspace and tmp dir writable by nobody, an
// outside dir (writable by everyone, so only the sandbox stops writes) and
// a secret file outside both, readable by everyone (only strict stops it).
type env struct {
	base, ws, tmp, outside, secret string
	nobody                         *Credential
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sandbox integration tests need root (cgroups, run-as)")
	}
	// Not under t.TempDir: its parent is 0700, which nobody cannot cross.
	base, err := os.MkdirTemp("", "pyexec-sbx-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	e := &env{base: base, ws: filepath.Join(base, "ws"), tmp: filepath.Join(base, "tmp"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{e.ws, e.tmp, e.outside} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777)
	}
	os.Chmod(base, 0o755)
	e.secret = hostile.SecretFile(t)
	e.nobody, err = LookupCredential("nobody")
	if err != nil {
		t.Skip("no nobody user")
	}
	return e
}

func (e *env) spec(p Policy) Spec {
	return Spec{Settings: Settings{Policy: p}, Workspace: e.ws, TmpDir: e.tmp, RunAs: e.nobody}
}

const python = "/usr/bin/python3.11"

func py(code string, args ...string) []string {
	return append([]string{python, "-S", "-c", code}, args...)
}

func needPython(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
}

// noCgroupLeft asserts no cgroup of this test process's runs is left.
func noCgroupLeft(t *testing.T) {
	t.Helper()
	noCgroupLeftFor(t, fmt.Sprintf("test-%d-", os.Getpid()))
}

// noCgroupLeftFor asserts no cgroup of run id prefix (or of run ids
// starting with it when it ends in "-") is left.
func noCgroupLeftFor(t *testing.T, prefix string) {
	t.Helper()
	for _, root := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified"} {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			name := strings.TrimPrefix(d.Name(), cgroupPrefix)
			// prefix "test-PID-" matches all of them, a run id only itself.
			if d.IsDir() && (name == prefix || strings.HasSuffix(prefix, "-") && strings.HasPrefix(name, prefix)) {
				t.Errorf("cgroup left behind: %s", p)
			}
			return nil
		})
	}
}

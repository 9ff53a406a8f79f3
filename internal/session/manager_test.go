package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/sandbox"
)

func TestMain(m *testing.M) {
	launcher.MaybeRun()
	os.Exit(m.Run())
}

func newManager(t *testing.T, cfg Config) (*Manager, string) {
	t.Helper()
	ws := t.TempDir()
	e, err := engine.New(engine.Config{Workspace: ws, StateDir: t.TempDir(), Warm: engine.WarmConfig{Spares: 1}})
	if err != nil {
		t.Fatal(err)
	}
	m := New(e, cfg)
	t.Cleanup(func() { m.Shutdown(); e.Close() })
	return m, e.Config().Workspace
}

func runCell(t *testing.T, m *Manager, name, code string) CellResult {
	t.Helper()
	res, err := m.Run(context.Background(), RunRequest{Session: name, Code: code})
	if err != nil {
		t.Fatalf("run %q in %s: %v", code, name, err)
	}
	return res
}

func kindOf(err error) string {
	var se *Error
	if errors.As(err, &se) {
		return se.Kind
	}
	var re *engine.RequestError
	if errors.As(err, &re) {
		return "field:" + re.Field
	}
	return ""
}

func TestSessionLifecycle(t *testing.T) {
	m, _ := newManager(t, Config{MaxSessions: 2})
	r := runCell(t, m, "a", "x = 1")
	if !r.SessionCreated || r.ExecutionCount != 1 || r.Status != StatusIdle || r.ExpiresAt.IsZero() {
		t.Fatalf("first cell: %+v", r)
	}
	r = runCell(t, m, "a", "x += 1; x")
	if r.SessionCreated || r.ExecutionCount != 2 || r.Result == nil || *r.Result != "2" {
		t.Fatalf("second cell: %+v", r)
	}
	// Settings are fixed at creation.
	for _, c := range []struct {
		st    Settings
		field string
	}{
		{Settings{Network: "deny"}, "network"},
		{Settings{EnvVars: map[string]string{"A": "1"}}, "env_vars"},
		{Settings{Env: "other"}, "env"}, // dependencies are not fixed: see TestSessionPackagesMidSession
		{Settings{Limits: &sandbox.Limits{MaxProcs: 10}}, "limits"},
	} {
		_, err := m.Run(context.Background(), RunRequest{Session: "a", Code: "1", Settings: c.st})
		if kindOf(err) != "field:"+c.field {
			t.Errorf("settings %+v: %v", c.st, err)
		}
	}
	if _, err := m.Run(context.Background(), RunRequest{Session: "bad name!", Code: "1"}); kindOf(err) != "field:session" {
		t.Errorf("bad name: %v", err)
	}
	if _, err := m.Create(context.Background(), CreateRequest{Session: "a"}); kindOf(err) != KindExists {
		t.Errorf("create existing: %v", err)
	}
	// The cap names the limit and lists the sessions.
	runCell(t, m, "b", "pass")
	_, err := m.Create(context.Background(), CreateRequest{Session: "c"})
	if kindOf(err) != KindLimit || !strings.Contains(err.Error(), "--max-sessions") || !strings.Contains(err.Error(), "a (idle") {
		t.Fatalf("over the cap: %v", err)
	}
	// Reset: same settings, fresh namespace.
	info, err := m.Reset(context.Background(), "a")
	if err != nil || info.ExecutionCount != 0 {
		t.Fatalf("reset: %+v %v", info, err)
	}
	r = runCell(t, m, "a", "'x' in globals()")
	if *r.Result != "False" || r.ExecutionCount != 1 {
		t.Fatalf("after reset: %+v", r)
	}
	fin, err := m.Close(context.Background(), "a")
	if err != nil || fin.Status != StatusClosed || fin.ExecutionCount != 1 {
		t.Fatalf("close: %+v %v", fin, err)
	}
	if _, err := m.Get(context.Background(), "a"); kindOf(err) != KindNotFound {
		t.Fatalf("after close: %v", err)
	}
	h, _ := m.History(context.Background(), "b")
	if len(h.Cells) != 1 || h.Cells[0].Code != "pass" {
		t.Fatalf("history: %+v", h)
	}
}

// A session that dies says why, once, and is not replaced silently.
func TestSessionLostReportedOnce(t *testing.T) {
	m, _ := newManager(t, Config{})
	if !m.eng.Capabilities().Cgroup.Available {
		t.Skip("no cgroups")
	}
	_, err := m.Create(context.Background(), CreateRequest{Session: "bomb", Settings: Settings{Limits: &sandbox.Limits{MemoryBytes: 80 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	r := runCell(t, m, "bomb", "keep = 1")
	r = runCell(t, m, "bomb", "b = bytearray(1 << 30)")
	if r.Status != StatusLost || r.LostReason != "memory" {
		t.Fatalf("memory bomb: %+v", r)
	}
	// Killed from outside between cells: the list and the next call say so.
	runCell(t, m, "k", "pass")
	m.mu.Lock()
	s := m.sessions["k"]
	m.mu.Unlock()
	p, _ := os.FindProcess(s.proc.PID())
	_ = p.Kill()
	<-s.ended
	list, _ := m.List(context.Background())
	found := false
	for _, in := range list {
		if in.Name == "k" {
			found = in.Status == StatusLost && in.LostReason == "killed"
		}
	}
	if !found {
		t.Fatalf("list after kill: %+v", list)
	}
	_, err = m.Run(context.Background(), RunRequest{Session: "k", Code: "1"})
	if kindOf(err) != KindLost || !strings.Contains(err.Error(), "signal 9") {
		t.Fatalf("call after kill: %v", err)
	}
	if r := runCell(t, m, "k", "1"); !r.SessionCreated {
		t.Fatalf("the name is free again: %+v", r)
	}
}

// Processes a cell starts die with the session, and two sessions see
// neither each other's files nor their processes.
func TestSessionIsolation(t *testing.T) {
	m, ws := newManager(t, Config{})
	runCell(t, m, "a", `
import os, subprocess, tempfile
open(os.path.join(tempfile.gettempdir(), "a-secret"), "w").write("x")
try:
    open("/dev/shm/a-shm", "w").write("x")
except OSError:
    pass
subprocess.Popen(["setsid", "sleep", "987.654"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
`)
	r := runCell(t, m, "b", `
import os, tempfile
seen = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            seen.append(open("/proc/%s/cmdline" % pid, "rb").read())
        except OSError:
            pass
(os.path.exists(os.path.join(tempfile.gettempdir(), "a-secret")), os.path.exists("/dev/shm/a-shm"), any(b"987.654" in c for c in seen))`)
	if r.Result == nil || *r.Result != "(False, False, False)" {
		t.Fatalf("session b sees session a: %+v", r)
	}
	// A session can end itself by signalling what it runs under (its
	// supervisor), like os._exit, and it is then reported lost; nothing
	// else is reachable: the other session and the server go on.
	r = runCell(t, m, "b", "import os, signal\nfor pid in (os.getppid(), 1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\n'survived'")
	if !(r.Status == StatusLost && r.LostReason == "killed") && (r.Result == nil || *r.Result != "'survived'") {
		t.Fatalf("session b after signalling its parent and pid 1: %+v", r)
	}
	if r := runCell(t, m, "a", "'a is fine'"); r.Result == nil || *r.Result != "'a is fine'" {
		t.Fatalf("session a after b's signals: %+v", r)
	}
	if _, err := m.Close(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if pids := processesWith("987.654"); len(pids) > 0 {
		t.Fatalf("a's daemon outlived the session: %v", pids)
	}
	_ = ws
}

func processesWith(marker string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, d)
		}
	}
	return out
}

// The hostile corpus inside a session: a fork bomb hits the session's own
// process limit and a memory bomb its memory limit; the other session and
// the server are unharmed.
func TestSessionHostile(t *testing.T) {
	m, _ := newManager(t, Config{InterruptGrace: 500 * time.Millisecond})
	if !m.eng.Capabilities().Cgroup.Available {
		t.Skip("no cgroups")
	}
	runCell(t, m, "bystander", "v = 'alive'")
	lim := Settings{Limits: &sandbox.Limits{MaxProcs: 32, MemoryBytes: 200 << 20}}
	if _, err := m.Create(context.Background(), CreateRequest{Session: "bomb", Settings: lim}); err != nil {
		t.Fatal(err)
	}
	// A fork bomb that swallows every error never ends by itself and is
	// held at the process limit. Whether or not the timeout's
	// KeyboardInterrupt stops its first process, the forks go on filling
	// the limit: the session is lost for its process limit; never the
	// server or another session.
	r, err := m.Run(context.Background(), RunRequest{Session: "bomb", Timeout: 2, Code: "import os\nwhile True:\n    try:\n        os.fork()\n    except BaseException:\n        pass"})
	if err != nil || !r.TimedOut || r.Status != StatusLost || r.LostReason != "processes" || !strings.Contains(r.LostDetail, "process limit") {
		t.Fatalf("fork bomb: %+v %v", r, err)
	}
	if _, err := m.Create(context.Background(), CreateRequest{Session: "bomb2", Settings: lim}); err != nil {
		t.Fatal(err)
	}
	r = runCell(t, m, "bomb2", "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))")
	if r.Status != StatusLost || r.LostReason != "memory" || !strings.Contains(r.LostDetail, "peak memory") {
		t.Fatalf("memory bomb: %+v", r)
	}
	if r := runCell(t, m, "bystander", "v"); r.Result == nil || *r.Result != "'alive'" {
		t.Fatalf("bystander: %+v", r)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

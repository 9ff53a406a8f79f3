package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Cold runs handed to launchers started ahead keep every confinement: as
// nobody, writing a root-owned workspace through the idmapping the
// launcher made while it waited (Expect), the file root's on disk, the
// state dir hidden; one launcher per run.
func TestPrestartedLaunchersConfineLikeFreshOnes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	e, ws := newTestEngine(t, func(c *Config) { c.Warm = WarmConfig{off: true}; c.Prestart = 2 })
	e.launchers.SetWait(true)
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	code := `
import os, sys
name = sys.argv[1]
open(name, "w").write("x")
try:
    os.listdir(sys.argv[2])
    print("state dir READ")
except OSError as e:
    print("state dir", type(e).__name__)
print(os.getuid(), os.getppid())
`
	for i, name := range []string{"a.txt", "b.txt", "c.txt"} {
		res := run(t, e, Request{Code: code, Args: []string{name, e.Config().StateDir}})
		if res.ExitCode != 0 || !strings.Contains(res.Sandbox, "uid 65534") {
			t.Fatalf("run %d: exit %d sandbox %q stderr %s notes %v", i, res.ExitCode, res.Sandbox, res.Stderr, res.SandboxNotes)
		}
		if strings.Contains(res.Stdout, "READ") || !strings.Contains(res.Stdout, "65534 0\n") {
			t.Fatalf("run %d: stdout %q (want uid 65534, its parent outside its PID namespace, the state dir unreadable)", i, res.Stdout)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(ws, name), &st); err != nil || st.Uid != 0 {
			t.Fatalf("run %d: %s on disk: uid %d, %v (want root's, through the idmapping)", i, name, st.Uid, err)
		}
	}
	if st := e.launchers.Stats(); st.Served != 3 || st.Fresh != 0 {
		t.Fatalf("pool %+v: want all three runs handed to launchers started ahead", st)
	}
	// Limits still apply: the memory cgroup ends a run that goes past it.
	lim := sandbox.Limits{MemoryBytes: 64 << 20}
	res, err := e.Run(context.Background(), Request{Code: "x = bytearray(256 << 20); print('survived')", Limits: &lim}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || res.LimitExceeded != sandbox.LimitMemory {
		t.Fatalf("exit %d limit %q stdout %q: want the memory limit hit", res.ExitCode, res.LimitExceeded, res.Stdout)
	}
}

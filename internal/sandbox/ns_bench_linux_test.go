package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func benchThread(b *testing.B, f func() error) {
	for i := 0; i < b.N; i++ {
		done := make(chan error)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread is discarded
			done <- f()
		}()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// Cost of the per-run namespaces, each on a throwaway thread.
func BenchmarkPrivateShm(b *testing.B) {
	benchThread(b, func() error { return enterPrivateShm(64 << 20) })
}
func BenchmarkEmptyNetNS(b *testing.B) { benchThread(b, enterEmptyNetNS) }

// Cost of computing and creating the workspace ruleset (not enforcing it).
func BenchmarkLandlockRuleset(b *testing.B) {
	home, _ := os.UserHomeDir()
	s := &Spec{Settings: Settings{Policy: PolicyWorkspace}, Workspace: b.TempDir(), Hidden: []string{home}}
	for i := 0; i < b.N; i++ {
		p, err := planLandlock(s, 7, false, true, "")
		if err != nil {
			b.Fatal(err)
		}
		fd, _, err := p.cfg.NewRulesetFD(p.rules...)
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
}

func BenchmarkCgroupLifecycle(b *testing.B) {
	for i := 0; i < b.N; i++ {
		cg, err := newCgroup(fmt.Sprintf("bench-%d-%d", os.Getpid(), i), Limits{MemoryBytes: 1 << 30, MaxProcs: 64})
		if err != nil {
			b.Skip(err)
		}
		cg.killAll()
		_ = cg.stats()
		if err := cg.remove(); err != nil {
			b.Fatal(err)
		}
	}
}

// The per-run namespaces every confined run of a root server gets on top of
// the private /dev/shm: an IPC namespace (with its /dev/mqueue), a PID
// namespace with its init and its own /proc, and nosuid everywhere.
func BenchmarkIPCNamespace(b *testing.B) {
	benchThread(b, func() error {
		if err := enterPrivateShm(64 << 20); err != nil {
			return err
		}
		return enterPrivateIPC()
	})
}

func BenchmarkPIDNamespaceWithProc(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	benchThread(b, func() error {
		if err := enterPrivateShm(64 << 20); err != nil {
			return err
		}
		init, err := startPIDNamespace(nil, -1)
		if err != nil {
			return err
		}
		defer func() {
			_ = unix.Kill(init, unix.SIGKILL)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(init, &ws, 0, nil)
		}()
		fd, err := openPIDNamespace(init)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return mountProc("/proc", fd, true)
	})
}

func BenchmarkNoSetIDMounts(b *testing.B) {
	dir := b.TempDir()
	benchThread(b, func() error {
		if err := enterPrivateShm(64 << 20); err != nil {
			return err
		}
		if err := bindNoSetID(dir); err != nil {
			return err
		}
		return noSetIDAnywhere()
	})
}

package jobs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// crash simulates the process dying: the store and the state-dir lock go
// away without any job being finalised.
func (m *Manager) crash() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.store.close()
	m.lockFile.Close() // the kernel drops the flock; the file stays, as after SIGKILL
}

func TestRestartRecoveryFailsUnfinishedJobs(t *testing.T) {
	f := newFake()
	cfg := Config{StateDir: t.TempDir(), Run: f.run, Logger: quietLogger(), MaxConcurrent: 1}
	ctx := context.Background()
	m, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	running, _ := m.Start(ctx, code("A"), "")
	c := f.next(t)
	c.stdout(t, "printed before the crash\n")
	c.stderr(t, "and a warning\n")
	pending, _ := m.Start(ctx, code("B"), "")
	m.crash()
	defer func() { m.stop(); m.wg.Wait() }() // let the orphaned goroutine end; its writes fail harmlessly

	m2, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(ctx)
	for _, id := range []string{running.ID, pending.ID} {
		j, err := m2.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != StatusFailed || j.Error != MsgRestarted || j.FinishedAt == nil {
			t.Fatalf("after restart: %+v", j)
		}
	}
	j, _ := m2.Get(ctx, running.ID)
	if j.StdoutBytes != 25 || j.StderrBytes != 14 {
		t.Fatalf("sizes after restart = %d/%d, want the log sizes", j.StdoutBytes, j.StderrBytes)
	}
	ch, err := m2.Output(ctx, running.ID, Cursor{})
	if err != nil || ch.Stdout != "printed before the crash\n" || ch.Stderr != "and a warning\n" || !ch.Done {
		t.Fatalf("output after restart = %+v, %v", ch, err)
	}
	locks, _ := os.ReadDir(ownersDir(cfg.StateDir))
	if len(locks) != 1 {
		t.Fatalf("owner locks left: %v (want only the live manager's)", locks)
	}
}

// TestRestartAfterSIGKILL kills a real process holding a running job with
// SIGKILL, then opens its state dir again.
func TestRestartAfterSIGKILL(t *testing.T) {
	if os.Getenv("PYEXEC_JOBS_CRASH_CHILD") != "" {
		crashChild()
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestartAfterSIGKILL$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PYEXEC_JOBS_CRASH_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
			id = rest
			break
		}
	}
	if id == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("child never got its job running")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	ctx := context.Background()
	m, err := Open(ctx, Config{StateDir: dir, Run: newFake().run, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	j, err := m.Get(ctx, id)
	if err != nil || j.Status != StatusFailed || j.Error != MsgRestarted {
		t.Fatalf("job after SIGKILL and restart = %+v, %v", j, err)
	}
	ch, err := m.Output(ctx, id, Cursor{})
	if err != nil || ch.Stdout != "line 1\nline 2\n" || ch.Stderr != "oops\n" {
		t.Fatalf("output after SIGKILL = %+v, %v", ch, err)
	}
}

// crashChild runs a job that prints, reports READY and blocks until killed.
func crashChild() {
	ctx := context.Background()
	run := func(ctx context.Context, req engine.Request, opts RunOptions, obs engine.Observer) (engine.Result, error) {
		obs.Started(os.Getpid())
		obs.Output(engine.Stdout, []byte("line 1\n"))
		obs.Output(engine.Stderr, []byte("oops\n"))
		obs.Output(engine.Stdout, []byte("line 2\n"))
		<-ctx.Done()
		return engine.Result{ExitCode: -9}, nil
	}
	m, err := Open(ctx, Config{StateDir: os.Getenv("PYEXEC_JOBS_CRASH_CHILD"), Run: run, Logger: quietLogger()})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	j, err := m.Start(ctx, code("x"), "doomed")
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	ch, _, _ := m.Subscribe(ctx, j.ID)
	for {
		// Wait until all three writes are in the logs.
		c, err := m.Output(ctx, j.ID, Cursor{})
		if err == nil && c.StdoutSize == 14 && c.StderrSize == 5 {
			break
		}
		<-ch
	}
	fmt.Println("READY " + j.ID)
	time.Sleep(time.Hour) // until the parent's SIGKILL (select{} could trip the deadlock detector)
}

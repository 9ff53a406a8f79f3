package jobs

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// BenchmarkStoreChurn measures the job lifecycle the store sustains: one op
// is create (pending) -> running -> completed, three writes.
func BenchmarkStoreChurn(b *testing.B) {
	ctx := context.Background()
	st, err := openStore(ctx, filepath.Join(b.TempDir(), "jobs.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.close()
	req := &engine.Request{Code: "print('hello')"}
	b.ResetTimer()
	for b.Loop() {
		now := time.Now()
		j := Job{ID: newID(), Status: StatusPending, CreatedAt: now, Request: req}
		if err := st.insert(ctx, &j, "bench"); err != nil {
			b.Fatal(err)
		}
		j.Status, j.StartedAt, j.PID = StatusRunning, &now, 1234
		if err := st.update(ctx, &j); err != nil {
			b.Fatal(err)
		}
		code := 0
		j.Status, j.FinishedAt, j.ExitCode = StatusCompleted, &now, &code
		j.Run = &RunInfo{ElapsedSeconds: 0.01}
		if err := st.update(ctx, &j); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(3*float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// BenchmarkOutputToWaitingReader measures the latency from an output append
// to a long-polling reader getting it (the issue's "line printed to
// get_job" path, minus the engine and MCP).
func BenchmarkOutputToWaitingReader(b *testing.B) {
	ctx := context.Background()
	f := newFake()
	m, err := Open(ctx, Config{StateDir: b.TempDir(), Run: f.run, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(ctx)
	j, _ := m.Start(ctx, code("x"), "")
	c := <-f.calls
	obs := c.obs
	waiting := make(chan struct{}, 1)
	m.onWait = func() { waiting <- struct{}{} }
	var off int64
	line := []byte("a line of output\n")
	b.ResetTimer()
	for b.Loop() {
		got := make(chan Chunk, 1)
		go func() {
			ch, _ := m.Output(ctx, j.ID, Cursor{StdoutOffset: off, Wait: time.Minute})
			got <- ch
		}()
		<-waiting
		obs.Output(engine.Stdout, line)
		ch := <-got
		off = ch.StdoutOffset
	}
	b.StopTimer()
	m.onWait = nil // Close cancels the fake run
}

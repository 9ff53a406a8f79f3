package engine

import (
	"context"
	"testing"
	"time"
)

// BenchmarkSessionStart: a session interpreter started from a ready warm
// fork server (the pool's replacement is awaited outside the timer), then
// one trivial cell.
func BenchmarkSessionStart(b *testing.B) {
	ws := b.TempDir()
	e, err := New(Config{Workspace: ws, StateDir: b.TempDir(), Warm: WarmConfig{Spares: 1, wait: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	mustRun := func() {
		if _, err := e.Run(ctx, Request{Code: "pass"}, nil); err != nil {
			b.Fatal(err)
		}
	}
	mustRun()
	var cells time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		mustRun() // waits for a ready fork server
		warm := e.WarmStats().Warm
		b.StartTimer()
		sp, err := e.StartSession(ctx, Request{}, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if e.WarmStats().Warm == warm {
			b.Fatal("the session started cold")
		}
		t0 := time.Now()
		if _, err := sp.RunCell(ctx, 1, "x = 1; x", time.Minute, time.Second, nil); err != nil {
			b.Fatal(err)
		}
		cells += time.Since(t0)
		sp.Kill("bench")
		<-sp.Done()
		b.StartTimer()
	}
	b.ReportMetric(float64(cells.Microseconds())/float64(b.N)/1000, "ms/first-cell")
}

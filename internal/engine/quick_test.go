package engine

import (
	"context"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func cpu() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestQuickTiming(t *testing.T) {
	for _, spares := range []int{2} {
		e, _ := New(Config{Workspace: t.TempDir(), StateDir: t.TempDir(), Warm: WarmConfig{Spares: spares, wait: true}})
		var ds []time.Duration
		for i := 0; i < 20; i++ {
			e.Run(context.Background(), Request{Code: "print(1)"}, nil)
		}
		c0 := cpu()
		var cpuRuns time.Duration
		for i := 0; i < 300; i++ {
			t0 := time.Now()
			r, _ := e.Run(context.Background(), Request{Code: "print(1)"}, nil)
			cpuRuns += time.Duration((r.CPUUserSeconds + r.CPUSystemSeconds) * 1e9)
			ds = append(ds, time.Since(t0))
		}
		c1 := cpu()
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		t.Logf("spares=%d median %v p10 %v p90 %v; server cpu/run %v; run tree cpu/run %v", spares, ds[150], ds[30], ds[270], (c1-c0)/300, cpuRuns/300)
		e.Close()
	}
}

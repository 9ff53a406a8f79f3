package engine

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// BenchmarkWarmRun runs print(1) on a warm interpreter under the default
// sandbox, one run after another, and reports besides the wall time the CPU
// time one run costs: this process's (the server) plus the warm
// interpreter's tree (its supervisors, and the runs they reaped), which is
// what decides throughput on a busy machine.
func BenchmarkWarmRun(b *testing.B) {
	ws, state := b.TempDir(), b.TempDir()
	// PYEXEC_BENCH_PYTHON picks the interpreter (e.g. a fresh venv's: the
	// default one may import more at startup, which every fork then copies).
	e, err := New(Config{Workspace: ws, StateDir: state, Python: os.Getenv("PYEXEC_BENCH_PYTHON"), Warm: WarmConfig{Spares: 2, wait: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	req := Request{Code: "print(1)"}
	for i := 0; i < 20; i++ { // start the fork server, settle
		if res, err := e.Run(ctx, req, nil); err != nil || res.Stdout != "1\n" {
			b.Fatalf("%+v %v", res, err)
		}
	}
	zpids := e.zygotePIDs()
	cpu := func() float64 {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		t := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
		for _, z := range zpids {
			t += treeCPU(z)
		}
		return t
	}
	b.ResetTimer()
	start := cpu()
	for i := 0; i < b.N; i++ {
		res, err := e.Run(ctx, req, nil)
		if err != nil || res.Stdout != "1\n" {
			b.Fatalf("%+v %v", res, err)
		}
	}
	b.StopTimer()
	b.ReportMetric((cpu()-start)*1000/float64(b.N), "cpu-ms/op")
	if st := e.WarmStats(); st.Cold > 0 {
		b.Logf("some runs went cold: %+v", st)
	}
}

// treeCPU is the CPU time (own and of reaped children) of pid and its
// descendants, in seconds.
func treeCPU(pid int) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	var ticks float64
	for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime (fields 14-17)
		v, _ := strconv.ParseFloat(f[k], 64)
		ticks += v
	}
	t := ticks / 100 // USER_HZ
	kids, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	for _, c := range strings.Fields(string(kids)) {
		if n, err := strconv.Atoi(c); err == nil {
			t += treeCPU(n)
		}
	}
	return t
}

package executor

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
)

func newTestLocal(t *testing.T) *Local {
	t.Helper()
	eng, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return NewLocal(eng, "test", 2)
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want Stats
	}{
		{"empty", nil, Stats{}},
		{"one", []float64{2}, Stats{Min: 2, Median: 2, Mean: 2, Max: 2}},
		{"odd", []float64{3, 1, 2}, Stats{Min: 1, Median: 2, Mean: 2, Max: 3, Stdev: 1}},
		{"even", []float64{4, 1, 3, 2}, Stats{Min: 1, Median: 2.5, Mean: 2.5, Max: 4, Stdev: math.Sqrt(5.0 / 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := describe(tc.in)
			if math.Abs(got.Stdev-tc.want.Stdev) > 1e-12 {
				t.Errorf("stdev = %g, want %g", got.Stdev, tc.want.Stdev)
			}
			got.Stdev, tc.want.Stdev = 0, 0
			if got != tc.want {
				t.Errorf("describe(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestBenchmarkLimits(t *testing.T) {
	ex := newTestLocal(t)
	neg := -1
	for _, tc := range []struct {
		name  string
		req   BenchmarkRequest
		field string
	}{
		{"repeat too big", BenchmarkRequest{Repeat: MaxBenchmarkRepeat + 1}, "repeat"},
		{"repeat negative", BenchmarkRequest{Repeat: -1}, "repeat"},
		{"warmup negative", BenchmarkRequest{Warmup: &neg}, "warmup"},
		{"rows too many", BenchmarkRequest{ProfileRows: MaxProfileRows + 1}, "profile_rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Code = "pass"
			_, err := Benchmark(context.Background(), ex, tc.req, nil)
			re, ok := err.(*engine.RequestError)
			if !ok || re.Field != tc.field {
				t.Fatalf("err = %v, want a RequestError on %s", err, tc.field)
			}
		})
	}
}

// TestBenchmarkPeakRSS checks the exactness the seed lacked: a script that
// touches a 200 MiB buffer reports a peak within 10% of it in every run.
func TestBenchmarkPeakRSS(t *testing.T) {
	ex := newTestLocal(t)
	const mib = 200
	zero := 0
	var beats int
	res, err := Benchmark(context.Background(), ex, BenchmarkRequest{
		Request: engine.Request{Code: "b = bytearray(200 * 1024 * 1024)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint('touched', len(b))\n"},
		Repeat:  3,
		Warmup:  &zero,
	}, func(Progress) { beats++ })
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || len(res.Runs) != 3 || res.Repeat != 3 || res.Warmup != 0 {
		t.Fatalf("result = %+v", res)
	}
	if !strings.Contains(res.Stdout, "touched 209715200") {
		t.Errorf("stdout = %q", res.Stdout)
	}
	for i, r := range res.Runs {
		got := float64(r.PeakRSSBytes) / (1 << 20)
		if got < mib || got > mib*1.1 {
			t.Errorf("run %d: peak RSS %.1f MiB, want within 10%% above %d MiB", i, got, mib)
		}
		// Where the run had a cgroup (the sandbox's default), its own
		// high-water mark must be as exact.
		if cg := float64(r.PeakMemoryBytes) / (1 << 20); r.PeakMemoryBytes > 0 && (cg < mib || cg > mib*1.1) {
			t.Errorf("run %d: cgroup peak %.1f MiB, want within 10%% above %d MiB", i, cg, mib)
		}
		t.Logf("run %d: peak RSS %.2f MiB (%.2f%% over the buffer), cgroup peak %.2f MiB, wall %.3fs, cpu %.3f+%.3fs", i, got, (got-mib)/mib*100, float64(r.PeakMemoryBytes)/(1<<20), r.WallSeconds, r.CPUUserSeconds, r.CPUSystemSeconds)
	}
	if res.PeakRSSMB != res.Statistics.PeakRSSMB.Median || res.WallTimeSeconds != res.Statistics.WallSeconds.Median ||
		res.CPUTimeSeconds != res.Statistics.CPUSeconds.Median {
		t.Errorf("top-level medians disagree with statistics: %+v", res)
	}
	if (res.Runs[0].PeakMemoryBytes > 0) != (res.Statistics.PeakMemoryMB != nil) {
		t.Errorf("peak_memory_mb statistics = %v with cgroup peaks %d", res.Statistics.PeakMemoryMB, res.Runs[0].PeakMemoryBytes)
	}
	if res.CPUTimeSeconds <= 0 || res.Statistics.WallSeconds.Min > res.Statistics.WallSeconds.Max {
		t.Errorf("statistics = %+v", res.Statistics)
	}
}

func TestBenchmarkProfileNamesHotFunction(t *testing.T) {
	ex := newTestLocal(t)
	one := 1
	code := "import sys\n\ndef hot_loop(n):\n    return sum(i * i for i in range(n))\n\ndef cold():\n    return 1\n\nprint(hot_loop(300000), cold(), sys.argv[1:])\n"
	res, err := Benchmark(context.Background(), ex, BenchmarkRequest{
		Request: engine.Request{Code: code, Args: []string{"a b", "$HOME"}},
		Repeat:  1, Warmup: &one, Profile: true, ProfileRows: 40,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stdout, "['a b', '$HOME']") {
		t.Errorf("stdout = %q", res.Stdout)
	}
	if len(res.Profile) == 0 || len(res.Profile) > 40 {
		t.Fatalf("profile = %+v (note %q)", res.Profile, res.ProfileNote)
	}
	names := []string{}
	for _, r := range res.Profile {
		names = append(names, r.Function)
	}
	if res.Profile[0].Function != "<module>" || !strings.Contains(strings.Join(names, " "), "hot_loop") {
		t.Errorf("profile functions = %v, want <module> first and hot_loop among them", names)
	}
	for _, r := range res.Profile {
		if strings.Contains(r.File, "runpy") || strings.Contains(r.File, "pkgutil") || strings.Contains(r.File, "zipimport") ||
			r.Function == "run_path" || r.Function == "_pyexec_profile" {
			t.Errorf("wrapper frame leaked into the profile: %+v", r)
		}
		if r.Function == "hot_loop" && (r.File != "<code>" || r.Line != 3) {
			t.Errorf("inline code is named %s:%d, want <code>:3", r.File, r.Line)
		}
	}
	if strings.Contains(res.Stderr, "@@pyexec-profile") {
		t.Errorf("profile marker leaked into the reported stderr: %q", res.Stderr)
	}
}

func TestBenchmarkStopsAtFailure(t *testing.T) {
	ex := newTestLocal(t)
	zero := 0
	res, err := Benchmark(context.Background(), ex, BenchmarkRequest{
		Request: engine.Request{Code: "import sys; sys.exit(3)"}, Repeat: 4, Warmup: &zero, Profile: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || res.ExitCode != 3 || len(res.Runs) != 1 || res.Note == "" || res.Profile != nil || res.ProfileNote == "" {
		t.Errorf("result = %+v", res)
	}
}

// The profiler's wrapper script lives outside the workspace (in the
// engine's code dir): the strict sandbox must still let the run read it.
func TestBenchmarkProfileUnderStrictSandbox(t *testing.T) {
	ex := newTestLocal(t)
	zero := 0
	res, err := Benchmark(context.Background(), ex, BenchmarkRequest{
		Request: engine.Request{Code: "def hot_loop():\n    return sum(range(100000))\nprint(hot_loop())\n", Sandbox: "strict"},
		Repeat:  1, Warmup: &zero, Profile: true,
	}, nil)
	if err != nil {
		t.Skipf("strict sandbox unavailable here: %v", err)
	}
	if !res.Success || res.Stdout != "4999950000\n" {
		t.Fatalf("result = %+v", res.Result)
	}
	found := false
	for _, r := range res.Profile {
		found = found || r.Function == "hot_loop"
	}
	if !found {
		t.Errorf("profile under strict sandbox = %+v (note %q)", res.Profile, res.ProfileNote)
	}
}

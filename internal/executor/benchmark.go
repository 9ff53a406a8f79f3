package executor

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// Benchmark limits: enough repetitions for stable statistics, few enough
// that one call cannot occupy the server for hours.
const (
	DefaultBenchmarkRepeat = 5
	MaxBenchmarkRepeat     = 100
	DefaultBenchmarkWarmup = 1
	MaxBenchmarkWarmup     = 10
	DefaultProfileRows     = 25
	MaxProfileRows         = 200
)

// BenchmarkRequest is a run request measured several times.
type BenchmarkRequest struct {
	engine.Request
	Repeat      int  `json:"repeat,omitempty" jsonschema:"Measured runs (default 5, at most 100). Statistics are computed over these."`
	Warmup      *int `json:"warmup,omitempty" jsonschema:"Unmeasured runs before the measured ones, to warm caches (default 1, at most 10)."`
	Profile     bool `json:"profile,omitempty" jsonschema:"When true, one extra run under cProfile (not part of the statistics) adds a table of the top functions by cumulative time. cProfile sees the main thread only."`
	ProfileRows int  `json:"profile_rows,omitempty" jsonschema:"Rows in the profile table (default 25, at most 200)."`
}

// BenchmarkRun is what one measured run cost.
type BenchmarkRun struct {
	WallSeconds      float64 `json:"wall_seconds" jsonschema:"Wall-clock time of the run."`
	CPUUserSeconds   float64 `json:"cpu_user_seconds" jsonschema:"User CPU time of the run's whole process tree."`
	CPUSystemSeconds float64 `json:"cpu_system_seconds" jsonschema:"System CPU time of the run's whole process tree."`
	PeakRSSBytes     int64   `json:"peak_rss_bytes" jsonschema:"Peak resident set size of the largest process of the run (kernel rusage, exact)."`
	PeakMemoryBytes  int64   `json:"peak_memory_bytes,omitempty" jsonschema:"High-water mark of the run's cgroup, all processes together (absent without a cgroup)."`
	ExitCode         int     `json:"exit_code" jsonschema:"Exit status of the run."`
}

// Stats summarises one measure over the measured runs.
type Stats struct {
	Min    float64 `json:"min" jsonschema:"Smallest value."`
	Median float64 `json:"median" jsonschema:"Median value."`
	Mean   float64 `json:"mean" jsonschema:"Arithmetic mean."`
	Max    float64 `json:"max" jsonschema:"Largest value."`
	Stdev  float64 `json:"stdev" jsonschema:"Sample standard deviation (0 with fewer than two runs)."`
}

// BenchmarkStats holds the statistics of every measure.
type BenchmarkStats struct {
	WallSeconds      Stats `json:"wall_seconds" jsonschema:"Wall-clock time per run, seconds."`
	CPUSeconds       Stats `json:"cpu_seconds" jsonschema:"User plus system CPU time per run, seconds."`
	CPUUserSeconds   Stats `json:"cpu_user_seconds" jsonschema:"User CPU time per run, seconds."`
	CPUSystemSeconds Stats `json:"cpu_system_seconds" jsonschema:"System CPU time per run, seconds."`
	PeakRSSMB        Stats `json:"peak_rss_mb" jsonschema:"Peak resident set size per run (largest process), MiB."`
	// PeakMemoryMB is set only when every measured run had a cgroup.
	PeakMemoryMB *Stats `json:"peak_memory_mb,omitempty" jsonschema:"Peak memory of the run's cgroup (all processes together) per run, MiB; present when every run had a cgroup."`
}

// ProfileRow is one function of the cProfile table.
type ProfileRow struct {
	Function       string  `json:"function" jsonschema:"Function name (built-ins in braces-free pstats form, e.g. <built-in method builtins.sum>)."`
	File           string  `json:"file" jsonschema:"Source file of the function (empty for built-ins)."`
	Line           int     `json:"line" jsonschema:"Line where the function is defined."`
	Calls          int     `json:"calls" jsonschema:"Number of calls, recursive ones included."`
	PrimitiveCalls int     `json:"primitive_calls" jsonschema:"Number of calls that were not recursive."`
	TottimeSeconds float64 `json:"tottime_seconds" jsonschema:"Time spent in the function itself, callees excluded."`
	CumtimeSeconds float64 `json:"cumtime_seconds" jsonschema:"Time spent in the function and everything it called."`
}

// BenchmarkResult is the seed's benchmark shape (stdout, stderr, exit_code,
// execution_strategy, elapsed_seconds, python_version_used and the medians
// wall_time_seconds, cpu_time_seconds, peak_rss_mb) plus every run and the
// statistics. The embedded Result is the last measured run.
type BenchmarkResult struct {
	engine.Result
	WallTimeSeconds float64 `json:"wall_time_seconds" jsonschema:"Median wall-clock time of the measured runs, seconds."`
	CPUTimeSeconds  float64 `json:"cpu_time_seconds" jsonschema:"Median CPU time (user + system, whole process tree) of the measured runs, seconds."`
	PeakRSSMB       float64 `json:"peak_rss_mb" jsonschema:"Median peak resident set size of the measured runs, MiB, from the kernel's exact accounting (not sampled)."`

	Repeat     int            `json:"repeat" jsonschema:"Measured runs requested."`
	Warmup     int            `json:"warmup" jsonschema:"Unmeasured warm-up runs done first."`
	Runs       []BenchmarkRun `json:"runs" jsonschema:"Every measured run in order. Fewer than repeat when a run failed (the benchmark stops at the first failure)."`
	Statistics BenchmarkStats `json:"statistics" jsonschema:"min, median, mean, max and stdev of each measure over the measured runs."`

	Profile     []ProfileRow `json:"profile,omitempty" jsonschema:"With profile: the top functions by cumulative time, from one extra cProfile run."`
	ProfileNote string       `json:"profile_note,omitempty" jsonschema:"Why the profile table is missing or what limits it."`
	Note        string       `json:"note,omitempty" jsonschema:"Anything else worth knowing about this benchmark (e.g. an early stop)."`
}

// Benchmark runs req warmup+repeat times through ex (plus one profiled run
// when asked) and summarises what the runs cost. It works over any Executor;
// the REST server reuses it with its local executor. progress reports the
// benchmark as a whole: elapsed time since the benchmark started (always
// increasing) and which run is going.
func Benchmark(ctx context.Context, ex Executor, req BenchmarkRequest, progress ProgressFunc) (BenchmarkResult, error) {
	repeat, warmup, rows, err := req.limits()
	if err != nil {
		return BenchmarkResult{}, err
	}
	if len(req.Request.Preamble) > 0 {
		return BenchmarkResult{}, &engine.RequestError{Field: "preamble", Message: "a benchmark cannot wrap a request that already has a preamble"}
	}
	start := time.Now()
	phase := func(name string) ProgressFunc {
		if progress == nil {
			return nil
		}
		return func(p Progress) {
			p.ElapsedSeconds = time.Since(start).Seconds()
			p.Message = fmt.Sprintf("%s: %s", name, p.Message)
			progress(p)
		}
	}

	out := BenchmarkResult{Repeat: repeat, Warmup: warmup, Runs: []BenchmarkRun{}}
	for i := range warmup {
		res, err := ex.Run(ctx, req.Request, phase(fmt.Sprintf("warm-up %d/%d", i+1, warmup)))
		if err != nil {
			return BenchmarkResult{}, err
		}
		if !res.Success {
			out.Result = res
			out.Note = fmt.Sprintf("warm-up run %d failed (exit code %d); nothing was measured", i+1, res.ExitCode)
			return out, nil
		}
	}
	for i := range repeat {
		res, err := ex.Run(ctx, req.Request, phase(fmt.Sprintf("run %d/%d", i+1, repeat)))
		if err != nil {
			return BenchmarkResult{}, err
		}
		out.Result = res
		out.Runs = append(out.Runs, BenchmarkRun{
			WallSeconds:      res.ElapsedSeconds,
			CPUUserSeconds:   res.CPUUserSeconds,
			CPUSystemSeconds: res.CPUSystemSeconds,
			PeakRSSBytes:     res.PeakRSSBytes,
			PeakMemoryBytes:  res.PeakMemoryBytes,
			ExitCode:         res.ExitCode,
		})
		if !res.Success {
			out.Note = fmt.Sprintf("measured run %d of %d failed (exit code %d, timed out: %t); the benchmark stopped there", i+1, repeat, res.ExitCode, res.TimedOut)
			break
		}
	}
	out.Statistics = summarise(out.Runs)
	out.WallTimeSeconds = out.Statistics.WallSeconds.Median
	out.CPUTimeSeconds = out.Statistics.CPUSeconds.Median
	out.PeakRSSMB = out.Statistics.PeakRSSMB.Median

	if req.Profile {
		if out.Note != "" {
			out.ProfileNote = "not profiled: a measured run failed"
		} else {
			out.Profile, out.ProfileNote, err = profile(ctx, ex, req.Request, rows, phase("profile"))
			if err != nil {
				return BenchmarkResult{}, err
			}
		}
	}
	return out, nil
}

func (r BenchmarkRequest) limits() (repeat, warmup, rows int, err error) {
	repeat, warmup, rows = r.Repeat, DefaultBenchmarkWarmup, r.ProfileRows
	if r.Warmup != nil {
		warmup = *r.Warmup
	}
	switch {
	case repeat < 0 || repeat > MaxBenchmarkRepeat:
		return 0, 0, 0, &engine.RequestError{Field: "repeat", Message: fmt.Sprintf("must be between 1 and %d, got %d", MaxBenchmarkRepeat, repeat)}
	case warmup < 0 || warmup > MaxBenchmarkWarmup:
		return 0, 0, 0, &engine.RequestError{Field: "warmup", Message: fmt.Sprintf("must be between 0 and %d, got %d", MaxBenchmarkWarmup, warmup)}
	case rows < 0 || rows > MaxProfileRows:
		return 0, 0, 0, &engine.RequestError{Field: "profile_rows", Message: fmt.Sprintf("must be between 1 and %d, got %d", MaxProfileRows, rows)}
	}
	if repeat == 0 {
		repeat = DefaultBenchmarkRepeat
	}
	if rows == 0 {
		rows = DefaultProfileRows
	}
	return repeat, warmup, rows, nil
}

// summarise computes the statistics of every measure.
func summarise(runs []BenchmarkRun) BenchmarkStats {
	pick := func(f func(BenchmarkRun) float64) Stats {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return describe(v)
	}
	st := BenchmarkStats{
		WallSeconds:      pick(func(r BenchmarkRun) float64 { return r.WallSeconds }),
		CPUSeconds:       pick(func(r BenchmarkRun) float64 { return r.CPUUserSeconds + r.CPUSystemSeconds }),
		CPUUserSeconds:   pick(func(r BenchmarkRun) float64 { return r.CPUUserSeconds }),
		CPUSystemSeconds: pick(func(r BenchmarkRun) float64 { return r.CPUSystemSeconds }),
		PeakRSSMB:        pick(func(r BenchmarkRun) float64 { return float64(r.PeakRSSBytes) / (1 << 20) }),
	}
	if len(runs) > 0 && !slices.ContainsFunc(runs, func(r BenchmarkRun) bool { return r.PeakMemoryBytes <= 0 }) {
		m := pick(func(r BenchmarkRun) float64 { return float64(r.PeakMemoryBytes) / (1 << 20) })
		st.PeakMemoryMB = &m
	}
	return st
}

// describe returns min, median, mean, max and the sample standard deviation
// (as Python's statistics.stdev) of v; zeros for an empty v.
func describe(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	var st Stats
	st.Min, st.Max = s[0], s[n-1]
	if n%2 == 1 {
		st.Median = s[n/2]
	} else {
		st.Median = (s[n/2-1] + s[n/2]) / 2
	}
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	st.Mean = sum / float64(n)
	if n > 1 {
		ss := 0.0
		for _, x := range s {
			ss += (x - st.Mean) * (x - st.Mean)
		}
		st.Stdev = math.Sqrt(ss / float64(n-1))
	}
	return st
}

package httpapi

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/ui"
)

// metrics are the server's Prometheus series, on a registry of its own (no
// global state: two servers in one test binary do not collide).
type metrics struct {
	reg         *prometheus.Registry
	runs        *prometheus.CounterVec
	runDuration prometheus.Histogram
	inFlight    prometheus.Gauge
	httpReqs    *prometheus.CounterVec
	httpLatency *prometheus.HistogramVec
	envRuns     *prometheus.CounterVec
	envRunCount atomic.Int64
	jobsStarted prometheus.Counter
}

// Run outcomes, the label of pyexec_runs_total.
const (
	outcomeSuccess  = "success"  // exit status 0
	outcomeFailure  = "failure"  // ran, exit status != 0
	outcomeTimeout  = "timeout"  // killed by its timeout
	outcomeRejected = "rejected" // request refused before running (400)
	outcomeBusy     = "busy"     // refused by the concurrency limit (429)
	outcomeError    = "error"    // could not be run (internal error, cancelled)
	outcomeHandoff  = "handoff"  // a smart-async run outlived its budget and became a job
)

// Histogram buckets, in seconds: round numbers (1-2.5-5 steps) a person
// reads at a glance in le="..." labels, from a warm run (a few ms) to the
// longest sync run (--max-timeout, 600 s by default).
var (
	runBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	httpBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
)

func newMetrics(version string, envBuilds func() int64) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyexec_runs_total",
			Help: "Python runs by outcome (success, failure, timeout, rejected, busy, error), from every front end (REST, /execute, MCP).",
		}, []string{"outcome"}),
		runDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pyexec_run_duration_seconds",
			Help:    "Wall time of runs that started (validation to result), in seconds.",
			Buckets: runBuckets,
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pyexec_runs_in_flight",
			Help: "Runs executing right now (a batch counts each entry).",
		}),
		httpReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyexec_http_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		httpLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pyexec_http_request_duration_seconds",
			Help:    "HTTP request latency by route, in seconds.",
			Buckets: httpBuckets,
		}, []string{"route"}),
		jobsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pyexec_jobs_started_total",
			Help: "Background jobs started explicitly (POST /v1/jobs, mode async); handed-off sync runs count as outcome=handoff in pyexec_runs_total.",
		}),
		envRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyexec_env_runs_total",
			Help: "Runs that used a cached uv environment (dependencies, PEP 723 or a project), by execution_strategy.",
		}, []string{"strategy"}),
	}
	if envBuilds != nil {
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "pyexec_env_builds_total",
				Help: "uv environment builds (cache misses that ran uv) since the server started.",
			}, func() float64 { return float64(envBuilds()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "pyexec_env_cache_hits_total",
				Help: "Runs that used a cached uv environment without building it (env runs minus builds).",
			}, func() float64 { return float64(max(0, m.envRunCount.Load()-envBuilds())) }),
		)
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "pyexec_build_info",
		Help:        "Always 1; the version label names the running pyexec.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	info.Set(1)
	reg.MustRegister(m.runs, m.runDuration, m.inFlight, m.httpReqs, m.httpLatency, m.envRuns, m.jobsStarted, info,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, o := range []string{outcomeSuccess, outcomeFailure, outcomeTimeout, outcomeRejected, outcomeBusy, outcomeError, outcomeHandoff} {
		m.runs.WithLabelValues(o) // export zeros so rates work from the start
	}
	return m
}

func outcomeOf(res engine.Result, err error) string {
	var re *engine.RequestError
	switch {
	case errors.As(err, &re):
		return outcomeRejected
	case errors.Is(err, errBusy):
		return outcomeBusy
	case err != nil:
		return outcomeError
	case res.TimedOut:
		return outcomeTimeout
	case !res.Success:
		return outcomeFailure
	}
	return outcomeSuccess
}

// admitted wraps the server's executor for every front end on this server
// (REST, /execute and MCP over HTTP): it counts runs into the metrics and
// enforces the concurrent-run limit (a clear "busy" error past it, 429 over
// REST, a tool error over MCP).
type admitted struct {
	executor.Executor
	sessionMethods // the executor's sessions, outside the run admission limit (sessions.go)
	m              *metrics
	runs           *ui.RunLog // what the audit page lists (nil: nothing recorded)
	limit          int64
	n              atomic.Int64
}

func (a *admitted) acquire(k int) error {
	if a.limit > 0 && a.n.Add(int64(k)) > a.limit {
		a.n.Add(-int64(k))
		return &BusyError{Limit: int(a.limit)}
	}
	if a.limit <= 0 {
		a.n.Add(int64(k))
	}
	a.m.inFlight.Add(float64(k))
	return nil
}

func (a *admitted) release(k int) {
	a.n.Add(-int64(k))
	a.m.inFlight.Sub(float64(k))
}

// Run implements executor.Executor.
func (a *admitted) Run(ctx context.Context, req engine.Request, progress executor.ProgressFunc) (engine.Result, error) {
	if err := a.acquire(1); err != nil {
		a.m.runs.WithLabelValues(outcomeBusy).Inc()
		return engine.Result{}, err
	}
	defer a.release(1)
	start := time.Now()
	res, err := a.Executor.Run(ctx, req, progress)
	a.observe(res, err, time.Since(start))
	a.runs.Add(routeOf(ctx), start, req, res, err)
	return res, err
}

// Batch implements executor.Executor.
func (a *admitted) Batch(ctx context.Context, req executor.BatchRequest, progress executor.ProgressFunc) (executor.BatchResult, error) {
	// A batch holds one slot per entry, but never more than the whole
	// limit (an idle server always admits a batch) and never more than a
	// valid batch has (an oversized one is rejected by the executor with
	// its own message).
	k := min(max(1, len(req.Requests)), executor.MaxBatch)
	if a.limit > 0 {
		k = min(k, int(a.limit))
	}
	if err := a.acquire(k); err != nil {
		a.m.runs.WithLabelValues(outcomeBusy).Add(float64(k))
		return executor.BatchResult{}, err
	}
	defer a.release(k)
	start := time.Now()
	out, err := a.Executor.Batch(ctx, req, progress)
	a.recordBatch(ctx, start, req, out)
	if err != nil {
		a.m.runs.WithLabelValues(outcomeOf(engine.Result{}, err)).Inc()
		return out, err
	}
	for _, it := range out.Results {
		if it.Error != "" {
			a.m.runs.WithLabelValues(outcomeRejected).Inc()
			continue
		}
		a.m.runs.WithLabelValues(outcomeOf(it.Result, nil)).Inc()
		a.m.env(it.Result)
		a.m.runDuration.Observe(it.ElapsedSeconds)
	}
	return out, nil
}

func (a *admitted) observe(res engine.Result, err error, d time.Duration) {
	o := outcomeOf(res, err)
	a.m.runs.WithLabelValues(o).Inc()
	a.m.env(res)
	if o != outcomeRejected && o != outcomeBusy {
		a.m.runDuration.Observe(d.Seconds())
	}
}

// env counts a run that used a uv environment.
func (m *metrics) env(res engine.Result) {
	if strings.HasPrefix(res.ExecutionStrategy, "uv-") {
		m.envRuns.WithLabelValues(res.ExecutionStrategy).Inc()
		m.envRunCount.Add(1)
	}
}

// watchJobs exports the job queue: jobs pending (the queue depth) and
// running, counted from the job store at scrape time.
func (m *metrics) watchJobs(jx executor.JobExecutor) {
	count := func(st jobs.Status) func() float64 {
		return func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			l, err := jx.Jobs(ctx, jobs.Filter{Status: st, Limit: 1})
			if err != nil {
				return -1
			}
			return float64(l.Total)
		}
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pyexec_jobs_pending", Help: "Background jobs waiting in the queue (queue depth); -1 when the store cannot be read."}, count(jobs.StatusPending)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pyexec_jobs_running", Help: "Background jobs running (including handed-off sync runs); -1 when the store cannot be read."}, count(jobs.StatusRunning)),
	)
}

package cli

import (
	"context"
	"flag"
	"log/slog"
	"maps"
	"runtime"
	"time"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
)

// jobFlags configure background jobs (servers only).
type jobFlags struct {
	syncBudget    float64
	jobTimeout    float64
	maxConcurrent int
	maxQueue      int
}

// jobAliases are the seed's names for the job flags.
var jobAliases = map[string][]string{
	"sync-budget": {"SMART_ASYNC_TIMEOUT_SECONDS"},
}

// withJobAliases merges the job aliases into a command's alias map.
func withJobAliases(aliases map[string][]string) map[string][]string {
	out := maps.Clone(aliases)
	maps.Copy(out, jobAliases)
	return out
}

func (f *jobFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&f.syncBudget, "sync-budget", jobs.DefaultSyncBudget.Seconds(), "seconds a sync run_python waits before handing the run off to a background job")
	fs.Float64Var(&f.jobTimeout, "job-timeout", jobs.DefaultJobTimeout.Seconds(), "time limit in seconds of a background job (0: none); a request's own shorter timeout still applies")
	fs.IntVar(&f.maxConcurrent, "max-concurrent", 2*runtime.NumCPU(), "most jobs (and job-backed sync runs) running at once; the rest wait as pending")
	fs.IntVar(&f.maxQueue, "max-queue", 100, "most pending jobs; past it new runs are refused as busy")
}

func (f *jobFlags) budget() time.Duration {
	if f.syncBudget <= 0 {
		return -1 // never hand off
	}
	return seconds(f.syncBudget)
}

// open starts the job manager on l's state dir.
func (f *jobFlags) open(ctx context.Context, l *executor.Local, logger *slog.Logger) (*executor.LocalJobs, error) {
	timeout := seconds(f.jobTimeout)
	if f.jobTimeout <= 0 {
		timeout = -1 // no limit
	}
	return executor.OpenLocalJobs(ctx, l, jobs.Config{
		StateDir:      l.Engine().Config().StateDir,
		MaxConcurrent: f.maxConcurrent,
		MaxQueue:      f.maxQueue,
		JobTimeout:    timeout,
		Logger:        logger,
	})
}

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
	"github.com/pyexec/pyexec/internal/pgdb"
	"github.com/pyexec/pyexec/internal/present"
)

// jobFlags configure background jobs (servers only).
type jobFlags struct {
	syncBudget    secondsFlag
	jobTimeout    secondsFlag
	maxConcurrent int
	maxQueue      int
	resultChars   int

	// Set by serve for a shared store (store.go).
	db       *pgdb.DB
	nodeID   string
	nodeLost time.Duration
}

// jobAliases are the seed's names for the job flags.
var jobAliases = map[string][]string{
	"sync-budget": {"SMART_ASYNC_TIMEOUT_SECONDS"},
}

// withJobAliases is a command's environment with the job aliases added.
func withJobAliases(aliases map[string][]string) envSpec {
	out := maps.Clone(aliases)
	maps.Copy(out, jobAliases)
	return envSpec{aliases: out}
}

func (f *jobFlags) register(fs *flag.FlagSet) {
	f.syncBudget = secondsFlag{d: jobs.DefaultSyncBudget, zeroMeans: "never hand off"}
	fs.Var(&f.syncBudget, "sync-budget", "seconds a sync run_python waits before handing the run off to a background job (0: never hand off)")
	f.jobTimeout = secondsFlag{d: jobs.DefaultJobTimeout, zeroMeans: "no time limit"}
	fs.Var(&f.jobTimeout, "job-timeout", "time limit in seconds of a background job, and of every run_python call and session cell, which can continue as jobs (0: none); a request's own shorter timeout still applies")
	fs.IntVar(&f.maxConcurrent, "max-concurrent", 2*runtime.NumCPU(), "most jobs (and job-backed sync runs) running at once; the rest wait as pending")
	fs.IntVar(&f.maxQueue, "max-queue", 100, "most pending jobs; past it new runs are refused as busy")
	fs.IntVar(&f.resultChars, "max-result-chars", present.DefaultBudget, "characters an MCP tool result carries by default (output over it is cut in the middle, the full output kept as a job); a call's max_output_chars may lower it or raise it up to 10 times this")
}

func (f *jobFlags) budget() time.Duration {
	if f.syncBudget.d <= 0 {
		return -1 // never hand off
	}
	return f.syncBudget.d
}

// open starts the job manager on l's state dir.
func (f *jobFlags) open(ctx context.Context, l *executor.Local, logger *slog.Logger) (*executor.LocalJobs, error) {
	timeout := f.jobTimeout.d
	if timeout <= 0 {
		timeout = -1 // no limit
	}
	return executor.OpenLocalJobs(ctx, l, jobs.Config{
		StateDir:      l.Engine().Config().StateDir,
		MaxConcurrent: f.maxConcurrent,
		MaxQueue:      f.maxQueue,
		JobTimeout:    timeout,
		Logger:        logger,
		DB:            f.db,
		NodeID:        f.nodeID,
		NodeLostAfter: f.nodeLost,
	})
}

// openLocal starts the in-process executor with background jobs, as both
// servers (mcp, serve) run it. closeAll stops what it started, in order:
// running jobs are killed and recorded as failed ("server shut down", output
// kept), then the engine stops its warm interpreters and lets new
// environments finish sealing.
func openLocal(ctx context.Context, ef *engineFlags, jf *jobFlags, logger *slog.Logger) (_ *executor.LocalJobs, closeAll func(), _ error) {
	local, err := ef.executor()
	if err != nil {
		return nil, nil, err
	}
	local.Prime()
	jx, err := jf.open(ctx, local, logger)
	if err != nil {
		local.Engine().Close()
		return nil, nil, err
	}
	closeAll = func() {
		// Sessions first: they are recorded lost (server_restarted) in the
		// job store, so a restarted server or another replica reports them.
		local.CloseSessions()
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := jx.Close(stopCtx); err != nil {
			logger.Error("closing jobs", "err", err)
		}
		local.Engine().Close()
	}
	return jx, closeAll, nil
}

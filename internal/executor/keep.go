package executor

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/present"
)

// keepFor sets the rule that keeps a synchronous run's job: its output
// outgrew what a result of budget characters shows, or its images will not
// all go inline. Everything else leaves nothing on disk (jobs.SyncOptions).
func keepFor(so *jobs.SyncOptions, budget int) {
	if budget <= 0 {
		budget = present.DefaultBudget
	}
	so.SpillAt = int64(budget)
	so.Keep = func(r engine.Result) bool {
		images, largest := 0, 0
		for _, d := range r.Display {
			for _, mime := range []string{"image/png", "image/jpeg", "image/gif"} {
				if v, ok := d.Data[mime]; ok {
					images++
					largest = max(largest, base64.StdEncoding.DecodedLen(len(v)))
				}
			}
		}
		return present.MustKeep(r.StdoutBytes, r.StderrBytes, images, largest, budget)
	}
}

// Batch implements Executor with jobs behind each entry, so that an entry
// whose output is cut keeps its full output as a job (BatchItem.JobID).
// Entries still run at most MaxWorkers at once, each under the batch's
// usual timeout (not the job timeout).
func (l *LocalJobs) Batch(ctx context.Context, req BatchRequest, progress ProgressFunc) (BatchResult, error) {
	n := len(req.Requests)
	if n == 0 || n > MaxBatch || req.MaxWorkers < 0 {
		return l.Local.Batch(ctx, req, progress) // the same errors
	}
	workers := req.MaxWorkers
	if workers == 0 {
		workers = l.maxWorkers
	}
	workers = min(workers, l.maxWorkers, n)
	cfg := l.eng.Config()
	share := present.BatchBudgetShare(req.OutputBudget, n)

	var c counter
	var done int
	var mu sync.Mutex
	stop := c.heartbeat(progress, func(p *Progress) {
		mu.Lock()
		p.Done, p.Total = done, n
		mu.Unlock()
		p.Message = fmt.Sprintf("%d/%d snippets done, %s", p.Done, n, p.Message)
	})
	defer stop()

	out := BatchResult{Results: make([]BatchItem, n)}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i, r := range req.Requests {
		// The batch's own limits, not the job timeout.
		switch {
		case r.Timeout < 0:
		case r.Timeout == 0:
			r.Timeout = cfg.DefaultTimeout.Seconds()
		default:
			r.Timeout = min(r.Timeout, cfg.MaxTimeout.Seconds())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			so := jobs.SyncOptions{Ephemeral: true}
			keepFor(&so, share)
			o, err := l.m.RunSync(ctx, r, so)
			item := BatchItem{Index: i}
			switch {
			case err != nil:
				item.Error = err.Error()
			case o.Result != nil:
				item.Result = *o.Result
				c.stdout.Add(o.Result.StdoutBytes)
				c.stderr.Add(o.Result.StderrBytes)
				if o.Kept {
					item.Result.OutputJobID = o.Job.ID
				}
			}
			item.Finish()
			out.Results[i] = item
			mu.Lock()
			done++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out, nil
}

package jobs

import (
	"context"
	"time"
)

// jobStore is where job metadata lives: SQLite in the state directory
// (store.go, the embedded default) or PostgreSQL shared by replicas
// (pgstore.go). The Manager talks only to this interface; storetest_test.go
// runs one suite against both implementations.
//
// Why unexported: the store is an implementation detail of the Manager (its
// rows mirror the Manager's in-memory jobs); callers choose one with
// Config.StoreURL.
type jobStore interface {
	// insert adds a new job stamped with its owner (the Manager that runs it).
	insert(ctx context.Context, j *Job, owner string) error
	// update writes every mutable field of j (state transitions and
	// throttled progress, never per output chunk).
	update(ctx context.Context, j *Job) error
	get(ctx context.Context, id string) (Job, error)
	list(ctx context.Context, f Filter) (JobList, error)
	// unfinished returns the pending and running jobs of owners other than
	// except, grouped by owner.
	unfinished(ctx context.Context, except string) (map[string][]string, error)
	// markAbandoned fails one unfinished job whose owner died, recording
	// the log sizes found on disk.
	markAbandoned(ctx context.Context, id string, at time.Time, stdout, stderr logState) error
	pruneCandidates(ctx context.Context, opts PruneOptions, now time.Time) ([]string, error)
	// deleteFinished removes the given jobs, re-checking that each is final.
	deleteFinished(ctx context.Context, ids []string) (int, error)
	count(ctx context.Context) (int, error)
	close() error
}

var _ jobStore = (*store)(nil)

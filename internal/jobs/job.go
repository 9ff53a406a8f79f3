// Package jobs runs Python requests as background jobs: a FIFO queue with a
// concurrency limit, metadata in SQLite, output spooled to append-only log
// files read back by byte cursors, script progress, cancellation, restart
// recovery and the smart-async handoff used by the synchronous tools.
//
// Why this shape: the seed this replaces rewrote a JSON file per output line,
// re-sent all output on every "incremental" read and marked jobs cancelled
// without stopping them. Here metadata is written only on state transitions
// (and throttled progress), output never enters the database, cursors address
// bytes in the logs so nothing is returned twice, and cancel goes through the
// run's context, which the engine turns into a kill of the whole process tree.
//
// The package does not know how a run is executed: the Manager is given a
// RunFunc (in production an adapter around engine.Engine.Run).
package jobs

import (
	"errors"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// Status is where a job is in its lifecycle:
// pending -> running -> completed | failed | cancelled.
type Status string

const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Terminal reports whether the status is final (the job will not change again).
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is one of the five known statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Error messages recorded on jobs that did not end by themselves.
const (
	MsgRestarted = "server restarted while the job was running"
	MsgShutdown  = "server shut down while the job was running"
	MsgCancelled = "cancelled by request"
	// MsgNodeLost is the error of a job whose node (a replica sharing a
	// PostgreSQL store) went silent past Config.NodeLostAfter.
	MsgNodeLost = "node_lost: the pyexec node running this job stopped heartbeating (it died or lost the database); output up to its last flush is kept"
)

var (
	// ErrNotFound is returned for an unknown job id.
	ErrNotFound = errors.New("job not found")
	// ErrBusy is returned by Start when the queue of pending jobs is full.
	ErrBusy = errors.New("server busy: too many jobs are queued; wait for some to finish or cancel some")
	// ErrClosed is returned once the Manager has been closed.
	ErrClosed = errors.New("job manager is closed")
)

// Progress is the last progress a script reported.
type Progress struct {
	Current   float64   `json:"current" jsonschema:"Units of work done so far, as reported by the script."`
	Total     float64   `json:"total,omitempty" jsonschema:"Total units of work, when the script knows it (0 or absent: unknown)."`
	Message   string    `json:"message,omitempty" jsonschema:"Free-text status message from the script."`
	UpdatedAt time.Time `json:"updated_at" jsonschema:"When the script last reported progress."`
}

// RunInfo is the metadata of a finished run (its output lives in the logs).
type RunInfo struct {
	ElapsedSeconds    float64 `json:"elapsed_seconds" jsonschema:"Wall-clock time of the run in seconds."`
	ExecutionStrategy string  `json:"execution_strategy,omitempty" jsonschema:"How the interpreter was chosen (system-python, venv, uv-env, uv-project)."`
	PythonVersionUsed string  `json:"python_version_used,omitempty" jsonschema:"Version of the interpreter that ran the code."`
	Executable        string  `json:"executable,omitempty" jsonschema:"Path of the interpreter that ran the code."`
	PeakRSSBytes      int64   `json:"peak_rss_bytes,omitempty" jsonschema:"Largest resident set size of any one process of the run (kernel rusage)."`
	PeakMemoryBytes   int64   `json:"peak_memory_bytes,omitempty" jsonschema:"High-water mark of the run's cgroup, all its processes together; absent when the run had no cgroup."`
	LimitExceeded     string  `json:"limit_exceeded,omitempty" jsonschema:"Which resource limit the run hit, if any: memory, cpu, processes or file_size."`
	Sandbox           string  `json:"sandbox,omitempty" jsonschema:"Confinement the run had: policy, network and the user it ran as."`
	// Artifacts are what the run displayed (artifacts.go).
	Artifacts []Artifact `json:"artifacts,omitempty" jsonschema:"What the run displayed (figures, images, tables), kept with the job: read an image as job://ID/artifacts/NAME."`
}

// Job is one job's metadata. Output is not part of it: read it with
// Manager.Output and byte cursors.
type Job struct {
	ID         string     `json:"job_id" jsonschema:"Opaque job id."`
	Label      string     `json:"label,omitempty" jsonschema:"Label given when the job was started."`
	Status     Status     `json:"status" jsonschema:"pending, running, completed, failed or cancelled. A timed-out run is failed with timed_out true."`
	CreatedAt  time.Time  `json:"created_at" jsonschema:"When the job was created (queued)."`
	StartedAt  *time.Time `json:"started_at,omitempty" jsonschema:"When the run started."`
	FinishedAt *time.Time `json:"finished_at,omitempty" jsonschema:"When the job reached a final status."`

	TimedOut       bool    `json:"timed_out" jsonschema:"True when the run was killed because it exceeded its timeout."`
	ExitCode       *int    `json:"exit_code,omitempty" jsonschema:"Exit status of the script once it finished; negative signal number when killed by a signal."`
	Error          string  `json:"error,omitempty" jsonschema:"Why the job failed or was cancelled, when it did not simply exit non-zero."`
	PID            int     `json:"pid,omitempty" jsonschema:"Process id of the run while it runs."`
	TimeoutSeconds float64 `json:"timeout_seconds" jsonschema:"Time limit of the run in seconds (0: none)."`

	Progress *Progress `json:"progress,omitempty" jsonschema:"Last progress reported by the script."`
	// Phase is transient (never stored): set while the run prepares, e.g.
	// while uv builds its environment.
	Phase string   `json:"phase,omitempty" jsonschema:"What the run is doing before Python starts, such as building its Python environment with uv; absent once Python runs."`
	Run   *RunInfo `json:"run,omitempty" jsonschema:"Interpreter and timing of the finished run."`

	StdoutBytes     int64 `json:"stdout_bytes" jsonschema:"Bytes the script wrote to stdout so far (including any dropped past the log cap)."`
	StderrBytes     int64 `json:"stderr_bytes" jsonschema:"Bytes the script wrote to stderr so far (including any dropped past the log cap)."`
	StdoutTruncated bool  `json:"stdout_truncated" jsonschema:"True when stdout exceeded the per-job log cap and the rest was dropped."`
	StderrTruncated bool  `json:"stderr_truncated" jsonschema:"True when stderr exceeded the per-job log cap and the rest was dropped."`

	// Request is the request the job runs, with env_vars values redacted
	// (they often hold secrets and the store is a plain file). List leaves it
	// nil unless Filter.IncludeRequest is set.
	Request *engine.Request `json:"request,omitempty" jsonschema:"The request the job runs (env_vars values redacted)."`

	// epoch is the claim this node holds on the job in a shared store
	// (fencing, see pgstore.go); 0 with SQLite.
	epoch int64
	// quiet marks a synchronous run not (yet) handed off: no other replica
	// knows its id, so its writes notify nobody and its output is flushed
	// on the FlushInterval tick only (shared stores).
	quiet bool
	// tail is the output not yet flushed when the job ended; the final
	// update writes it in the same statement (shared stores).
	tail *outputTail
}

// Filter selects jobs for List.
type Filter struct {
	Status         Status // empty: any
	Label          string // empty: any; otherwise exact match
	Limit          int    // <= 0: DefaultListLimit
	IncludeRequest bool
}

// DefaultListLimit is the number of jobs List returns when Filter.Limit is unset.
const DefaultListLimit = 50

// JobList is a page of jobs, newest first, and how many matched before the limit.
type JobList struct {
	Jobs  []Job `json:"jobs" jsonschema:"Matching jobs, newest first."`
	Total int   `json:"total" jsonschema:"Number of jobs matching the filter before the limit was applied."`
}

// PruneOptions says which finished jobs Prune removes. Pending and running
// jobs are never pruned.
type PruneOptions struct {
	KeepCompleted bool    // keep completed jobs
	KeepFailed    bool    // keep failed and cancelled jobs
	MaxAgeHours   float64 // only remove jobs finished more than this long ago; 0: any age
}

// PruneResult tells how many jobs Prune removed and how many remain.
type PruneResult struct {
	Removed   int `json:"removed" jsonschema:"Number of jobs removed together with their logs."`
	Remaining int `json:"remaining" jsonschema:"Number of jobs left in the store."`
}

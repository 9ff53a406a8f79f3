// Package executor is the seam between the front ends (MCP, REST, CLI) and
// whatever runs Python: the in-process engine (Local) or, later, a remote
// `pyexec serve` reached over HTTP. Front ends never know which one they hold.
package executor

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Executor is what the front ends talk to.
type Executor interface {
	// Run executes one request to completion. progress, when non-nil, is
	// called at least once a second while the run lasts.
	Run(ctx context.Context, req engine.Request, progress ProgressFunc) (engine.Result, error)
	// Batch runs independent requests in parallel; one failing entry never
	// fails the batch.
	Batch(ctx context.Context, req BatchRequest, progress ProgressFunc) (BatchResult, error)
	// Info describes the executing side: version, workspace, interpreters,
	// uv and limits.
	Info(ctx context.Context) (Info, error)
}

// Progress is a heartbeat of a running call: clients whose request timeout
// resets on progress keep waiting, and people see that output is flowing.
type Progress struct {
	ElapsedSeconds float64
	StdoutBytes    int64
	StderrBytes    int64
	Done, Total    int // batch entries finished / submitted (0 for a single run)
	Message        string
}

// ProgressFunc receives progress; it must not block for long.
type ProgressFunc func(Progress)

// MaxBatch is the largest number of entries one batch may hold.
const MaxBatch = 20

// BatchWireLimit is the largest JSON encoding of a batch: MaxBatch entries'
// worth of inline code plus one whole request's other fields (26 MiB with
// the default 1 MiB code limit). It is the largest request pyexec reads, so
// it also bounds a stdio frame.
func BatchWireLimit(codeLimit int) int64 {
	return MaxBatch*int64(codeLimit) + engine.WireLimit(codeLimit)
}

// BatchRequest is a list of independent runs.
type BatchRequest struct {
	Requests   []engine.Request `json:"requests"`
	MaxWorkers int              `json:"max_workers,omitempty"`
	// OutputBudget is the characters the caller will show of the whole
	// batch; with jobs, entries whose output exceeds their share are kept
	// as jobs (BatchItem.JobID) so the full output stays readable.
	OutputBudget int `json:"output_budget,omitempty" jsonschema:"Characters of output the caller will show for the whole batch (default 20000); entries whose output exceeds their share are kept as jobs (job_id) with their full output."`
}

// BatchResult holds one item per request, in input order.
type BatchResult struct {
	Results []BatchItem `json:"results" jsonschema:"One result per snippet, in input order."`
}

// BatchItem is a run's result, or the reason the entry was rejected.
type BatchItem struct {
	engine.Result
	Index int    `json:"index" jsonschema:"Position of this entry in the input list."`
	Error string `json:"error,omitempty" jsonschema:"Why this entry was rejected before running (its other fields are then empty)."`
	// Exception is the run's uncaught exception (Result.Error, whose JSON
	// name a batch entry gives to Error): set by Finish.
	Exception *engine.RunError `json:"exception,omitempty" jsonschema:"The uncaught exception the snippet died of, when it died of one (what a run result calls error)."`
	// Set instead of a result when the batch ran in mode async.
	JobID  string `json:"job_id,omitempty" jsonschema:"With mode async: the background job running this entry (follow it with get_job)."`
	Status string `json:"status,omitempty" jsonschema:"With mode async: the job's status when it was started (pending or running)."`
}

// Finish sets the fields derived from the entry's result; decoders of a
// batch call it too, to restore Result.Error.
func (it *BatchItem) Finish() {
	switch {
	case it.Result.Error != nil:
		it.Exception = it.Result.Error
	case it.Exception != nil:
		it.Result.Error = it.Exception
	}
}

// Finish calls Finish on every entry.
func (r *BatchResult) Finish() {
	for i := range r.Results {
		r.Results[i].Finish()
	}
}

// Info describes an executor.
type Info struct {
	Version            string               `json:"version" jsonschema:"pyexec version."`
	Workspace          string               `json:"workspace" jsonschema:"Root directory scripts, cwd and env files must be inside."`
	StateDir           string               `json:"state_dir" jsonschema:"Directory where pyexec keeps its state."`
	DefaultInterpreter engine.Interpreter   `json:"default_interpreter" jsonschema:"Interpreter used when a request names none and its cwd has no .venv."`
	Interpreters       []engine.Interpreter `json:"interpreters" jsonschema:"Interpreters installed on this machine, newest first (select one with python_version)."`
	UV                 string               `json:"uv" jsonschema:"uv version, or 'not installed'."`
	Limits             Limits               `json:"limits" jsonschema:"Limits every run is held to."`
	Sandbox            SandboxInfo          `json:"sandbox" jsonschema:"Confinement every run gets, and what this kernel can enforce."`
	Warm               *engine.WarmStats    `json:"warm,omitempty" jsonschema:"How runs started so far: warm (forked from a ready interpreter) or cold, with why runs went cold. Absent when warm interpreters are off."`
	Prestart           *launcher.PoolStats  `json:"prestart,omitempty" jsonschema:"Launchers started ahead for runs that start cold (--prestart): how many are kept, ready now, and how many runs got one or had to start their own. Absent when off."`
}

// SandboxInfo is the server's confinement configuration and the kernel's
// capabilities, for server_info and doctor.
type SandboxInfo struct {
	Policy       string               `json:"policy" jsonschema:"Default policy: none, workspace or strict. Requests may only tighten it."`
	Network      string               `json:"network" jsonschema:"Network access of runs by default: allow or deny."`
	RunAs        string               `json:"run_as" jsonschema:"Who Python runs as when the server is root: auto, none, or a user."`
	RunsAs       string               `json:"runs_as" jsonschema:"Who runs of the default interpreter in the workspace actually execute as, and why (e.g. nobody, or root without capabilities because nobody cannot reach the state dir)."`
	BestEffort   bool                 `json:"best_effort" jsonschema:"True when runs proceed even if the kernel cannot enforce the whole policy (what was skipped is reported per result)."`
	Limits       sandbox.Limits       `json:"limits" jsonschema:"Resource limits of every run (-1: unlimited)."`
	Capabilities sandbox.Capabilities `json:"capabilities" jsonschema:"Which confinement mechanisms this kernel offers and, for each missing one, why."`
}

// Limits are the server-wide limits, as reported to clients.
type Limits struct {
	DefaultTimeoutSeconds float64 `json:"default_timeout_seconds" jsonschema:"Timeout applied when a request gives none."`
	MaxTimeoutSeconds     float64 `json:"max_timeout_seconds" jsonschema:"Largest timeout a request can get; larger ones are capped."`
	MaxCodeBytes          int     `json:"max_code_bytes" jsonschema:"Largest inline code accepted."`
	MaxStdinBytes         int     `json:"max_stdin_bytes,omitempty" jsonschema:"Largest stdin accepted (larger input belongs in a workspace file)."`
	MaxRequestBytes       int64   `json:"max_request_bytes,omitempty" jsonschema:"Largest request accepted on the wire (JSON), a batch excepted."`
	MaxBatchRequestBytes  int64   `json:"max_batch_request_bytes,omitempty" jsonschema:"Largest batch request accepted on the wire (JSON)."`
	OutputCapBytes        int     `json:"output_cap_bytes" jsonschema:"Bytes of each stream returned inline; the middle of longer output is dropped."`
	MaxBatch              int     `json:"max_batch" jsonschema:"Most snippets in one batch."`
	MaxWorkers            int     `json:"max_workers" jsonschema:"Most batch entries run at once."`
	TmpLimitBytes         int64   `json:"tmp_limit_bytes,omitempty" jsonschema:"Total size of all runs' temp dirs (TMPDIR) together; a run's temp files also count against its memory limit. Absent: not capped (see tmp_note)."`
	TmpNote               string  `json:"tmp_note,omitempty" jsonschema:"Why run temp dirs are not capped, when they are not."`

	// Background jobs (absent when the executor runs none).
	JobTimeoutSeconds float64 `json:"job_timeout_seconds,omitempty" jsonschema:"Time limit of a run that continues as a background job (0 or absent: none); a request's own shorter timeout still applies."`
	SyncBudgetSeconds float64 `json:"sync_budget_seconds,omitempty" jsonschema:"How long a sync run_python call waits before returning a job id and letting the run continue in the background."`
	MaxConcurrent     int     `json:"max_concurrent,omitempty" jsonschema:"Most job-backed runs executing at once; the rest wait as pending."`
	MaxQueue          int     `json:"max_queue,omitempty" jsonschema:"Most pending jobs; past it new runs are refused as busy."`

	// Timeouts says in words which limit applies to which kind of run.
	Timeouts string `json:"timeouts,omitempty" jsonschema:"Which time limit applies to which run, in words: defaults, caps, and what 0 means."`
}

// TimeoutStory is the one rule for time limits, with this server's numbers:
// which limit a run gets, what 0 and huge values mean. It is what
// server_info says and what the README's timeout section explains.
func TimeoutStory(l Limits) string {
	jobs := l.MaxConcurrent > 0
	seconds := func(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) + "s" }
	var b strings.Builder
	if jobs {
		limit := "no limit (--job-timeout 0)"
		if l.JobTimeoutSeconds > 0 {
			limit = seconds(l.JobTimeoutSeconds) + " (--job-timeout)"
		}
		fmt.Fprintf(&b, "run_python calls (session cells included) and background jobs: the request's timeout when it is shorter than the job limit, else the job limit, %s", limit)
		if l.SyncBudgetSeconds > 0 {
			fmt.Fprintf(&b, "; a sync call still running after %s continues as a background job", seconds(l.SyncBudgetSeconds))
		}
		b.WriteString(". Batch entries, benchmarks and plain REST runs (/v1/run without sync_budget, /execute): ")
	} else {
		b.WriteString("Every run: ")
	}
	fmt.Fprintf(&b, "the request's timeout, default %s (--timeout), at most %s (--max-timeout). ", seconds(l.DefaultTimeoutSeconds), seconds(l.MaxTimeoutSeconds))
	b.WriteString("timeout 0 or absent means the default; a larger value than the limit gets the limit; a negative one is refused. On timeout the whole process tree is killed and the output so far is kept.")
	return b.String()
}

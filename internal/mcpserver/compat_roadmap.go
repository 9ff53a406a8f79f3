package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
)

// The python-executor-mcp roadmap (its README's section 13) named tools it
// never built. pyexec has each capability already; these are thin adapters
// under those names (compat toolset): job_cleanup (prune plus the
// autosaved code of removed jobs), stream_deltas (the byte-cursor read as
// one opaque cursor), run_script_profile (one cProfile run with its table),
// and environment_cache_list / environment_create_persistent (envs.go).

// JobCleanupInput is the input of job_cleanup.
type JobCleanupInput struct {
	KeepCompleted   bool    `json:"keep_completed,omitempty" jsonschema:"Keep completed jobs (default false: remove them)."`
	KeepFailed      bool    `json:"keep_failed,omitempty" jsonschema:"Keep failed and cancelled jobs (default false: remove them)."`
	MaxAgeHours     float64 `json:"max_age_hours,omitempty" jsonschema:"Only remove jobs that finished more than this many hours ago (default 0: any age). Pending and running jobs are never removed."`
	RemoveAutosaved *bool   `json:"remove_autosaved,omitempty" jsonschema:"Also delete the autosaved code of jobs that no longer exist (default true). Each job's output logs go with the job; runs' temp dirs are removed after every run already."`
	Rendering
}

// JobCleanupOutput says what job_cleanup removed.
type JobCleanupOutput struct {
	RemovedJobs      int `json:"removed_jobs" jsonschema:"Finished jobs removed, with their output logs."`
	RemainingJobs    int `json:"remaining_jobs" jsonschema:"Jobs left."`
	RemovedAutosaved int `json:"removed_autosaved" jsonschema:"Autosaved inline scripts of removed jobs deleted."`
}

// StreamDeltasInput is the input of stream_deltas.
type StreamDeltasInput struct {
	JobID    string  `json:"job_id" jsonschema:"The job to read."`
	Cursor   string  `json:"cursor,omitempty" jsonschema:"The cursor a previous call returned (default: the start). Nothing before it is returned again."`
	Wait     float64 `json:"wait,omitempty" jsonschema:"Seconds to wait for new output or the end when there is nothing new yet (at most 120; default 0)."`
	MaxBytes int     `json:"max_bytes,omitempty" jsonschema:"Most bytes of each stream to return (default 262144)."`
	Rendering
}

// StreamDeltasOutput is one delta.
type StreamDeltasOutput struct {
	JobID  string `json:"job_id" jsonschema:"The job."`
	Status string `json:"status" jsonschema:"The job's status: pending, running, completed, failed or cancelled."`
	Stdout string `json:"stdout" jsonschema:"New standard output since the cursor."`
	Stderr string `json:"stderr" jsonschema:"New standard error since the cursor."`
	Cursor string `json:"cursor" jsonschema:"Pass it back as cursor to get only what comes next."`
	Done   bool   `json:"done" jsonschema:"True when the job has finished and everything has been returned."`
}

// RunScriptProfileInput is the input of run_script_profile.
type RunScriptProfileInput struct {
	ScriptContent  string            `json:"script_content,omitempty" jsonschema:"Inline Python source (autosaved). Give script_content or script_path."`
	ScriptPath     string            `json:"script_path,omitempty" jsonschema:"Existing .py file inside the workspace. Give script_content or script_path."`
	Args           []string          `json:"args,omitempty" jsonschema:"Arguments passed to the script (sys.argv[1:])."`
	PythonVersion  string            `json:"python_version,omitempty" jsonschema:"Python version like 3.12 (installed interpreters only)."`
	Dependencies   []string          `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements to install into the run's environment."`
	Env            string            `json:"env,omitempty" jsonschema:"A named environment (env_create) to run in."`
	TimeoutSeconds *float64          `json:"timeout_seconds,omitempty" jsonschema:"Timeout in seconds; 0 means no limit (capped at the server's maximum). Default: the server's default."`
	EnvVars        map[string]string `json:"env_vars,omitempty" jsonschema:"Environment variables to set (override env_file)."`
	EnvFile        string            `json:"env_file,omitempty" jsonschema:"Path of a .env file inside the workspace, loaded before env_vars."`
	ProfileRows    int               `json:"profile_rows,omitempty" jsonschema:"Rows in the profile table (default 25, at most 200)."`
	Rendering
}

func (t *tools) registerRoadmapCompat(srv *mcp.Server) {
	if t.jobs != nil {
		addTool(t, srv, &mcp.Tool{
			Name:        "job_cleanup",
			Title:       "Remove finished jobs and their files (python-executor-mcp roadmap name)",
			Description: "Remove finished jobs with their output logs and the autosaved code of jobs that are gone; keep_* and max_age_hours narrow it. Pending and running jobs are never removed.",
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
		}, t.jobCleanup)
		addTool(t, srv, &mcp.Tool{
			Name:  "stream_deltas",
			Title: "Read a job's new output (python-executor-mcp roadmap name)",
			Description: "Return a job's output since cursor and the next cursor: pass it back to get only what is new (nothing is returned twice). " +
				"wait=N long-polls. Same as get_job with byte offsets, as one opaque cursor.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		}, t.streamDeltas)
	}
	addTool(t, srv, &mcp.Tool{
		Name:  "run_script_profile",
		Title: "Profile a script with cProfile (python-executor-mcp roadmap name)",
		Description: "Run script_content or a workspace script_path once under cProfile and return its output with a table of the top functions by cumulative time " +
			"(calls, own time, cumulative time, where). cProfile sees the main thread only.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.runScriptProfile)
}

// cleanupJobs prunes and then drops the autosaved code of jobs that no
// longer exist (py_cleanup_jobs and job_cleanup).
func (t *tools) cleanupJobs(ctx context.Context, opts jobs.PruneOptions, removeAutosaved bool) (JobCleanupOutput, error) {
	r, err := t.jobs.ex.Prune(ctx, opts)
	if err != nil {
		return JobCleanupOutput{}, err
	}
	out := JobCleanupOutput{RemovedJobs: r.Removed, RemainingJobs: r.Remaining}
	if removeAutosaved && t.scripts != nil {
		// Where the scripts live (here, or on the execution server).
		if out.RemovedAutosaved, err = t.scripts.RemoveOrphanedAutosaves(ctx); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (t *tools) jobCleanup(ctx context.Context, _ *mcp.CallToolRequest, in JobCleanupInput) (*mcp.CallToolResult, JobCleanupOutput, error) {
	out, err := t.cleanupJobs(ctx, jobs.PruneOptions{KeepCompleted: in.KeepCompleted, KeepFailed: in.KeepFailed, MaxAgeHours: in.MaxAgeHours},
		in.RemoveAutosaved == nil || *in.RemoveAutosaved)
	if err != nil {
		return nil, JobCleanupOutput{}, err
	}
	return render(in.Rendering, out, func() string {
		return fmt.Sprintf("Removed %d finished job(s) with their logs and %d autosaved script(s); %d job(s) remain.\n", out.RemovedJobs, out.RemovedAutosaved, out.RemainingJobs)
	}), out, nil
}

// parseCursor reads "STDOUT_OFFSET:STDERR_OFFSET" (the SSE event id shape).
func parseCursor(c string) (int64, int64, error) {
	if c == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(c, ":")
	out, err1 := strconv.ParseInt(a, 10, 64)
	errOut, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || out < 0 || errOut < 0 {
		return 0, 0, fmt.Errorf("cursor: %q is not a cursor this server returned (leave it empty to read from the start)", c)
	}
	return out, errOut, nil
}

func (t *tools) streamDeltas(ctx context.Context, _ *mcp.CallToolRequest, in StreamDeltasInput) (*mcp.CallToolResult, StreamDeltasOutput, error) {
	o, e, err := parseCursor(in.Cursor)
	if err != nil {
		return nil, StreamDeltasOutput{}, err
	}
	wait, err := engine.Seconds("wait", in.Wait, 0, maxWait)
	if err != nil {
		return nil, StreamDeltasOutput{}, err
	}
	ch, err := t.jobs.ex.Output(ctx, in.JobID, jobs.Cursor{StdoutOffset: o, StderrOffset: e, MaxBytes: in.MaxBytes, Wait: wait})
	if err != nil {
		return nil, StreamDeltasOutput{}, jobError(in.JobID, err)
	}
	j, err := t.jobs.ex.Job(ctx, in.JobID)
	if err != nil {
		return nil, StreamDeltasOutput{}, jobError(in.JobID, err)
	}
	out := StreamDeltasOutput{JobID: j.ID, Status: string(j.Status), Stdout: ch.Stdout, Stderr: ch.Stderr,
		Cursor: fmt.Sprintf("%d:%d", ch.StdoutOffset, ch.StderrOffset), Done: ch.Done && j.Status.Terminal()}
	return render(in.Rendering, out, func() string {
		var b strings.Builder
		b.WriteString(jobLine(j) + "\n")
		if out.Done {
			b.WriteString("\nEverything has been returned.\n")
		} else {
			fmt.Fprintf(&b, "\nNext: stream_deltas(job_id=%q, cursor=%q, wait=30)\n", j.ID, out.Cursor)
		}
		writeStream(&b, "new stdout", out.Stdout, int64(len(out.Stdout)), false)
		writeStream(&b, "new stderr", out.Stderr, int64(len(out.Stderr)), false)
		return b.String()
	}), out, nil
}

func (t *tools) runScriptProfile(ctx context.Context, req *mcp.CallToolRequest, in RunScriptProfileInput) (*mcp.CallToolResult, executor.ProfileResult, error) {
	r := engine.Request{Args: in.Args, PythonVersion: in.PythonVersion, Dependencies: in.Dependencies, Env: in.Env, EnvVars: in.EnvVars, EnvFile: in.EnvFile}
	if err := seedSource(&r, in.ScriptPath, in.ScriptContent); err != nil {
		return nil, executor.ProfileResult{}, err
	}
	timeout, err := t.seedTimeout(ctx, in.TimeoutSeconds)
	if err != nil {
		return nil, executor.ProfileResult{}, err
	}
	r.Timeout = timeout
	p, ok := t.ex.(executor.Profiler)
	if !ok {
		return nil, executor.ProfileResult{}, errors.New("this server's executor cannot profile (an execution server older than this front end?)")
	}
	t.autosave("run_script_profile", r, "")
	res, err := p.Profile(ctx, executor.ProfileRequest{Request: r, Rows: in.ProfileRows}, progressTo(ctx, req))
	if err != nil {
		return nil, executor.ProfileResult{}, err
	}
	return render(in.Rendering, res, func() string {
		var b strings.Builder
		b.WriteString("**profile** · one run under cProfile\n\n")
		b.WriteString(renderResult(res.Result))
		writeProfileTable(&b, res.Profile)
		if res.ProfileNote != "" {
			fmt.Fprintf(&b, "\nprofile: %s\n", res.ProfileNote)
		}
		return b.String()
	}), res, nil
}

package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/jobs"
)

// python-executor-mcp's job tools, as thin adapters over pyexec's jobs. The
// seed's shapes are kept, including its string-typed fields ("True",
// "None"); pyexec's own job tools (get_job, cancel_job, list_jobs,
// prune_jobs) have typed fields and byte cursors. Where the seed re-sent
// everything (get_job_output, job-stream://), these return the output from
// the start too, capped like a resource read.

// RunScriptInDirAsyncInput is the input of run_script_in_dir_async.
type RunScriptInDirAsyncInput struct {
	Directory     string            `json:"directory" jsonschema:"Directory to run in (must exist inside the workspace); a relative script_path is resolved against it."`
	ScriptPath    string            `json:"script_path,omitempty" jsonschema:"Existing .py file (absolute, or relative to directory), inside the workspace. Give script_path or script_content."`
	ScriptContent string            `json:"script_content,omitempty" jsonschema:"Inline Python source (autosaved). Give script_path or script_content."`
	Args          []string          `json:"args,omitempty" jsonschema:"Arguments passed to the script (sys.argv[1:])."`
	UseUV         bool              `json:"use_uv,omitempty" jsonschema:"Accepted for compatibility; python_version applies only when use_uv is true, as in the seed."`
	PythonVersion string            `json:"python_version,omitempty" jsonschema:"Python version like 3.13 (installed interpreters only); applies only when use_uv is true."`
	Stream        bool              `json:"stream,omitempty" jsonschema:"Accepted for compatibility: pyexec always spools a job's output to its log, readable at any time (get_job_output, job-stream://, get_job with cursors)."`
	EnvVars       map[string]string `json:"env_vars,omitempty" jsonschema:"Environment variables to set (override env_file)."`
	EnvFile       string            `json:"env_file,omitempty" jsonschema:"Path of a .env file inside the workspace, loaded before env_vars."`
	JobLabel      string            `json:"job_label,omitempty" jsonschema:"Label for the job (py_list_jobs / list_jobs can filter by it)."`
	Rendering
}

// RunWithDepsAsyncInput is the input of run_script_with_dependencies_async.
type RunWithDepsAsyncInput struct {
	ScriptPath    string            `json:"script_path,omitempty" jsonschema:"Existing .py file inside the workspace. Give script_path or script_content."`
	ScriptContent string            `json:"script_content,omitempty" jsonschema:"Inline Python source (autosaved). Give script_path or script_content."`
	PythonVersion string            `json:"python_version,omitempty" jsonschema:"Python version like 3.13 (installed interpreters only)."`
	Dependencies  []string          `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements to install into the run's environment."`
	Args          []string          `json:"args,omitempty" jsonschema:"Arguments passed to the script (sys.argv[1:])."`
	Stream        bool              `json:"stream,omitempty" jsonschema:"Accepted for compatibility: pyexec always spools a job's output to its log."`
	EnvVars       map[string]string `json:"env_vars,omitempty" jsonschema:"Environment variables to set (override env_file)."`
	EnvFile       string            `json:"env_file,omitempty" jsonschema:"Path of a .env file inside the workspace, loaded before env_vars."`
	JobLabel      string            `json:"job_label,omitempty" jsonschema:"Label for the job."`
	Rendering
}

// AsyncJobStartOutput is the seed's AsyncJobStart / AsyncDepsJobStart.
type AsyncJobStartOutput struct {
	JobID                string   `json:"job_id" jsonschema:"The background job; follow it with get_job_output, py_job_status, job-stream://{job_id} or get_job."`
	Status               string   `json:"status" jsonschema:"Always started, as in the seed; job_status has the job's real status."`
	JobStatus            string   `json:"job_status" jsonschema:"The job's status now: pending (queued) or running."`
	ExecutionStrategy    string   `json:"execution_strategy" jsonschema:"How the interpreter is chosen; known once the run has started (empty here: see py_job_status)."`
	PythonVersionUsed    string   `json:"python_version_used,omitempty" jsonschema:"The Python version asked for (the exact version is in the job's run info once it has run)."`
	ResolvedDependencies []string `json:"resolved_dependencies,omitempty" jsonschema:"Always empty at start: dependencies are resolved when the job runs (see py_job_status / get_job_output)."`
	Message              string   `json:"message" jsonschema:"How to follow the job."`
}

// JobIDOnlyInput is the input of the seed's per-job tools.
type JobIDOnlyInput struct {
	JobID string `json:"job_id" jsonschema:"The job id returned when the job was started."`
	Rendering
}

// ListRunningJobsInput is the (empty) input of list_running_jobs.
type ListRunningJobsInput struct {
	Rendering
}

// SeedJobEntry is one job as list_running_jobs shows it (strings, as in
// the seed).
type SeedJobEntry struct {
	JobID          string `json:"job_id" jsonschema:"Job id."`
	Running        string `json:"running" jsonschema:"True or False."`
	ExitCode       string `json:"exit_code" jsonschema:"Exit code, or None while running."`
	PID            string `json:"pid" jsonschema:"Process id while running, else empty."`
	ElapsedSeconds string `json:"elapsed_seconds" jsonschema:"Seconds since the job started (until it finished)."`
	Stream         string `json:"stream" jsonschema:"Always True: pyexec spools every job's output."`
	StdoutChunks   string `json:"stdout_chunks" jsonschema:"Bytes of stdout captured so far (pyexec counts bytes, not chunks)."`
	StderrChunks   string `json:"stderr_chunks" jsonschema:"Bytes of stderr captured so far."`
	Status         string `json:"job_status" jsonschema:"pyexec's status: pending, running, completed, failed or cancelled."`
}

// ListRunningJobsOutput wraps the seed's list (structured content must be
// an object; FastMCP used the key result the same way).
type ListRunningJobsOutput struct {
	Result []SeedJobEntry `json:"result" jsonschema:"Running and pending jobs, newest first (at most 100)."`
}

// GetJobOutputOutput is the seed's get_job_output payload.
type GetJobOutputOutput struct {
	Status         string `json:"status" jsonschema:"running (pending or running) or finished."`
	Stdout         string `json:"stdout" jsonschema:"Output from the start (at most 1 MiB; get_job reads the rest by offset)."`
	Stderr         string `json:"stderr" jsonschema:"Error output from the start (at most 1 MiB)."`
	ExitCode       string `json:"exit_code" jsonschema:"Exit code, or None while running."`
	ElapsedSeconds string `json:"elapsed_seconds" jsonschema:"Seconds since the job started (until it finished)."`
	JobStatus      string `json:"job_status" jsonschema:"pyexec's status: pending, running, completed, failed or cancelled."`
	Truncated      bool   `json:"truncated" jsonschema:"True when more output exists than returned here."`
}

// KillJobOutput is the seed's kill_job payload.
type KillJobOutput struct {
	JobID     string `json:"job_id" jsonschema:"The job."`
	Status    string `json:"status" jsonschema:"killed when this call stopped it; otherwise the status it had already reached."`
	ExitCode  string `json:"exit_code" jsonschema:"Exit code, or None if not known yet."`
	JobStatus string `json:"job_status" jsonschema:"pyexec's status of the job after the call."`
}

// SeedJobStatus is the job as py_job_status shows it: pyexec's job plus the
// final result once it has one.
type SeedJobStatus struct {
	jobs.Job
	Result *SeedJobResult `json:"result,omitempty" jsonschema:"Output and exit code once the job has finished."`
}

// SeedJobResult is a finished job's output.
type SeedJobResult struct {
	Stdout   string `json:"stdout" jsonschema:"Output (at most 1 MiB)."`
	Stderr   string `json:"stderr" jsonschema:"Error output (at most 1 MiB)."`
	ExitCode *int   `json:"exit_code,omitempty" jsonschema:"Exit code."`
}

// PyJobStatusOutput is py_job_status's payload: {"job": {...}}.
type PyJobStatusOutput struct {
	Job SeedJobStatus `json:"job" jsonschema:"The job: status, progress, timestamps and (when finished) result."`
}

// PyListJobsInput is the input of py_list_jobs.
type PyListJobsInput struct {
	StatusFilter string `json:"status_filter,omitempty" jsonschema:"Only jobs with this status: pending, running, completed, failed or cancelled."`
	Limit        int    `json:"limit,omitempty" jsonschema:"Most jobs to return, newest first (default 50)."`
	Rendering
}

func (t *tools) registerPyExecMCPJobsCompat(srv *mcp.Server) {
	jt := t.jobs
	if jt == nil {
		return // no background jobs in this executor
	}
	if !t.jobsRegistered {
		// The seed's resource, served even without the jobs toolset.
		jt.srv = srv
		srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "job-stream", Title: "Job output (python-executor-mcp)", URITemplate: "job-stream://{job_id}", MIMEType: "text/plain",
			Description: "Snapshot of a job's output: ---STDOUT--- then ---STDERR---."}, jt.readResource)
	}
	add := func(name, title, desc string, ro bool) *mcp.Tool {
		a := &mcp.ToolAnnotations{OpenWorldHint: ptr(true)}
		if ro {
			a = &mcp.ToolAnnotations{ReadOnlyHint: true}
		}
		return &mcp.Tool{Name: name, Title: title + " (python-executor-mcp compatible)", Description: desc, Annotations: a}
	}
	addTool(t, srv, add("run_script_in_dir_async", "Start a script in a directory as a job",
		"Start an existing .py file or inline script_content in a workspace directory as a background job and return its job_id at once.", false), t.runScriptInDirAsync)
	addTool(t, srv, add("run_script_with_dependencies_async", "Start a script with dependencies as a job",
		"Start inline script_content or a script_path with explicit dependencies as a background job and return its job_id at once.", false), t.runScriptWithDepsAsync)
	addTool(t, srv, add("list_running_jobs", "List running jobs",
		"List the background jobs that are running or pending (finished ones: py_list_jobs), with the seed's string fields (running, exit_code, pid, elapsed_seconds, ...).", true), t.listRunningJobs)
	addTool(t, srv, add("get_job_output", "Get a job's output",
		"A job's status (running or finished), output from the start, exit code and elapsed time. For only the new output use get_job with byte offsets.", true), t.getJobOutput)
	killTool := add("kill_job", "Kill a job", "Stop a running job: its whole process tree is killed; its output is kept.", false)
	killTool.Annotations = &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true}
	addTool(t, srv, killTool, t.killJob)
	addTool(t, srv, add("py_job_status", "Get a job's status",
		"A job's status, progress reported by the script, timestamps, and its result once finished, as {\"job\": {...}}; incremental (default true) returns only output not returned before.", true), t.pyJobStatus)
	addTool(t, srv, add("py_list_jobs", "List jobs", "List jobs, newest first, optionally by status_filter; total counts all matches.", true), t.pyListJobs)
	cancelTool := add("py_cancel_job", "Cancel a job", "Cancel a pending or running job (its process tree is killed; output kept).", false)
	cancelTool.Annotations = &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true}
	addTool(t, srv, cancelTool, t.pyCancelJob)
	pruneTool := add("py_prune_jobs", "Remove finished jobs", "Remove finished jobs older than max_age_hours (default 24) and their logs; completed and failed jobs are kept unless keep_completed / keep_failed is false. Returns how many were removed and remain.", false)
	pruneTool.Annotations = &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true}
	addTool(t, srv, pruneTool, t.pyPruneJobsReal)
}

func (t *tools) startSeedJob(ctx context.Context, tool string, r engine.Request, label string, rendering Rendering) (*mcp.CallToolResult, AsyncJobStartOutput, error) {
	j, err := t.jobs.ex.Start(ctx, r, label)
	if err != nil {
		return nil, AsyncJobStartOutput{}, toolError(err)
	}
	t.autosave(tool, r, j.ID)
	out := AsyncJobStartOutput{JobID: j.ID, Status: "started", JobStatus: string(j.Status), PythonVersionUsed: r.PythonVersion,
		Message: fmt.Sprintf("Started job %s (%s). Follow it with get_job_output(job_id=%q), py_job_status, or get_job for only new output; stop it with kill_job.", j.ID, j.Status, j.ID)}
	if len(r.Dependencies) > 0 {
		out.ResolvedDependencies = []string{}
	}
	return render(rendering, out, func() string { return "**" + out.Message + "**\n" }), out, nil
}

func (t *tools) runScriptInDirAsync(ctx context.Context, _ *mcp.CallToolRequest, in RunScriptInDirAsyncInput) (*mcp.CallToolResult, AsyncJobStartOutput, error) {
	version := ""
	if in.UseUV {
		version = in.PythonVersion
	}
	r := engine.Request{Args: in.Args, Cwd: in.Directory, PythonVersion: version, EnvVars: in.EnvVars, EnvFile: in.EnvFile}
	if err := seedSource(&r, in.ScriptPath, in.ScriptContent); err != nil {
		return nil, AsyncJobStartOutput{}, toolError(err)
	}
	if r.Cwd == "" {
		return nil, AsyncJobStartOutput{}, errors.New("directory: give the directory to run in")
	}
	return t.startSeedJob(ctx, "run_script_in_dir_async", r, in.JobLabel, in.Rendering)
}

func (t *tools) runScriptWithDepsAsync(ctx context.Context, _ *mcp.CallToolRequest, in RunWithDepsAsyncInput) (*mcp.CallToolResult, AsyncJobStartOutput, error) {
	r := engine.Request{Args: in.Args, PythonVersion: in.PythonVersion, EnvVars: in.EnvVars, EnvFile: in.EnvFile}
	if err := seedSource(&r, in.ScriptPath, in.ScriptContent); err != nil {
		return nil, AsyncJobStartOutput{}, toolError(err)
	}
	if err := applyDependencies(&r, in.Dependencies); err != nil {
		return nil, AsyncJobStartOutput{}, toolError(err)
	}
	return t.startSeedJob(ctx, "run_script_with_dependencies_async", r, in.JobLabel, in.Rendering)
}

// seedBool and seedInt render values the way the seed's Python str() did.
func seedBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func seedExit(code *int) string {
	if code == nil {
		return "None"
	}
	return strconv.Itoa(*code)
}

func seedElapsed(j jobs.Job) string {
	if j.StartedAt == nil {
		return "0.0"
	}
	end := time.Now()
	if j.FinishedAt != nil {
		end = *j.FinishedAt
	}
	return strconv.FormatFloat(end.Sub(*j.StartedAt).Seconds(), 'f', 3, 64)
}

func (t *tools) listRunningJobs(ctx context.Context, _ *mcp.CallToolRequest, in ListRunningJobsInput) (*mcp.CallToolResult, ListRunningJobsOutput, error) {
	// Running and pending jobs only, as the tool's name says (newest first).
	var l jobs.JobList
	for _, st := range []jobs.Status{jobs.StatusRunning, jobs.StatusPending} {
		part, err := t.jobs.ex.Jobs(ctx, jobs.Filter{Status: st, Limit: 100})
		if err != nil {
			return nil, ListRunningJobsOutput{}, toolError(err)
		}
		l.Jobs = append(l.Jobs, part.Jobs...)
	}
	slices.SortStableFunc(l.Jobs, func(a, b jobs.Job) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if len(l.Jobs) > 100 {
		l.Jobs = l.Jobs[:100]
	}
	out := ListRunningJobsOutput{Result: []SeedJobEntry{}}
	for _, j := range l.Jobs {
		pid := ""
		if j.PID > 0 && !j.Status.Terminal() {
			pid = strconv.Itoa(j.PID)
		}
		out.Result = append(out.Result, SeedJobEntry{
			JobID: j.ID, Running: seedBool(!j.Status.Terminal()), ExitCode: seedExit(j.ExitCode), PID: pid,
			ElapsedSeconds: seedElapsed(j), Stream: "True",
			StdoutChunks: strconv.FormatInt(j.StdoutBytes, 10), StderrChunks: strconv.FormatInt(j.StderrBytes, 10),
			Status: string(j.Status),
		})
	}
	return render(in.Rendering, out, func() string {
		var b strings.Builder
		if len(l.Jobs) == 0 {
			b.WriteString("No job is running or pending. Finished jobs: list_jobs or py_list_jobs.\n")
		} else {
			fmt.Fprintf(&b, "%d running or pending job(s), newest first:\n", len(l.Jobs))
		}
		for _, j := range l.Jobs {
			b.WriteString("- " + jobLine(j) + "\n")
		}
		return b.String()
	}), out, nil
}

// fullOutput reads a job's output from the start, up to snapshotBytes per
// stream.
func (t *tools) fullOutput(ctx context.Context, id string) (jobs.Chunk, bool, error) {
	ch, err := t.jobs.ex.Output(ctx, id, jobs.Cursor{MaxBytes: snapshotBytes})
	if err != nil {
		return jobs.Chunk{}, false, jobError(id, err)
	}
	return ch, ch.StdoutOffset < ch.StdoutSize || ch.StderrOffset < ch.StderrSize, nil
}

func (t *tools) getJobOutput(ctx context.Context, _ *mcp.CallToolRequest, in JobIDOnlyInput) (*mcp.CallToolResult, GetJobOutputOutput, error) {
	ch, truncated, err := t.fullOutput(ctx, in.JobID)
	if err != nil {
		return nil, GetJobOutputOutput{}, toolError(err)
	}
	j, err := t.jobs.ex.Job(ctx, in.JobID)
	if err != nil {
		return nil, GetJobOutputOutput{}, jobError(in.JobID, err)
	}
	out := GetJobOutputOutput{Status: "running", Stdout: ch.Stdout, Stderr: ch.Stderr, ExitCode: seedExit(j.ExitCode),
		ElapsedSeconds: seedElapsed(j), JobStatus: string(j.Status), Truncated: truncated}
	if j.Status.Terminal() {
		out.Status = "finished"
	}
	return render(in.Rendering, out, func() string {
		var b strings.Builder
		b.WriteString(jobLine(j) + "\n")
		writeStream(&b, "stdout", out.Stdout, ch.StdoutSize, truncated)
		writeStream(&b, "stderr", out.Stderr, ch.StderrSize, truncated)
		return b.String()
	}), out, nil
}

func (t *tools) killJob(ctx context.Context, _ *mcp.CallToolRequest, in JobIDOnlyInput) (*mcp.CallToolResult, KillJobOutput, error) {
	j, stopped, err := cancelJob(ctx, t.jobs.ex, in.JobID)
	if err != nil {
		return nil, KillJobOutput{}, toolError(err)
	}
	out := KillJobOutput{JobID: j.ID, Status: string(j.Status), ExitCode: seedExit(j.ExitCode), JobStatus: string(j.Status)}
	if stopped {
		out.Status = "killed"
	}
	return render(in.Rendering, out, func() string {
		return fmt.Sprintf("Job `%s`: **%s** (exit code %s).\n", out.JobID, out.Status, out.ExitCode)
	}), out, nil
}

func (t *tools) pyListJobs(ctx context.Context, req *mcp.CallToolRequest, in PyListJobsInput) (*mcp.CallToolResult, jobs.JobList, error) {
	return t.jobs.listJobs(ctx, req, ListJobsInput{Status: in.StatusFilter, Limit: in.Limit, Rendering: in.Rendering})
}

func (t *tools) pyCancelJob(ctx context.Context, req *mcp.CallToolRequest, in JobIDOnlyInput) (*mcp.CallToolResult, jobs.Job, error) {
	return t.jobs.cancelJob(ctx, req, JobIDInput{JobID: in.JobID, Rendering: in.Rendering})
}

package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/imports"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/scripts"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// The tools python-executor-mcp's running server registers, under their
// real py_-prefixed names with their real parameters and defaults (its
// README documents most of them without the prefix; both are served). Where
// a default matters it is applied here: timeout_seconds 300, use_uv true,
// python_version "3.12" for the dependency tools (when 3.12 is installed:
// pyexec never downloads interpreters, and says so in note otherwise),
// auto_parse_imports / auto_install_deps true (package imports), and
// py_prune_jobs keeping completed and failed jobs younger than 24 hours.

// seedDefaultTimeout is the seed server's timeout_seconds default.
const seedDefaultTimeout = 300.0

// seedDefaultPython is the seed server's python_version default for its
// dependency tools.
const seedDefaultPython = "3.12"

// PyScriptFields are the run parameters the py_ run tools share.
type PyScriptFields struct {
	ScriptPath     string            `json:"script_path,omitempty" jsonschema:"Existing .py file (absolute, or relative to directory / the workspace), inside the workspace. Give script_path or script_content."`
	ScriptContent  string            `json:"script_content,omitempty" jsonschema:"Inline Python source (autosaved). Give script_path or script_content."`
	Args           []string          `json:"args,omitempty" jsonschema:"Arguments passed to the script (sys.argv[1:])."`
	TimeoutSeconds *float64          `json:"timeout_seconds,omitempty" jsonschema:"Timeout in seconds (default 300); 0 means no limit, which pyexec caps at the server's maximum."`
	EnvVars        map[string]string `json:"env_vars,omitempty" jsonschema:"Environment variables to set (override env_file)."`
	EnvFile        string            `json:"env_file,omitempty" jsonschema:"Path of a .env file (python-dotenv format) inside the workspace, loaded before env_vars."`
	AsyncMode      bool              `json:"async_mode,omitempty" jsonschema:"Start the run as a background job and return its job_id at once (default false)."`
	JobLabel       string            `json:"job_label,omitempty" jsonschema:"Label for the background job (with async_mode or a smart-async switch)."`
}

func (f PyScriptFields) seed() SeedScriptFields {
	timeout := f.TimeoutSeconds
	if timeout == nil {
		d := seedDefaultTimeout
		timeout = &d
	}
	return SeedScriptFields{ScriptPath: f.ScriptPath, ScriptContent: f.ScriptContent, Args: f.Args, TimeoutSeconds: timeout,
		EnvVars: f.EnvVars, EnvFile: f.EnvFile, AsyncMode: f.AsyncMode, JobLabel: f.JobLabel}
}

// PyRunScriptInDirInput is the input of py_run_script_in_dir.
type PyRunScriptInDirInput struct {
	Directory string `json:"directory" jsonschema:"Directory to run in (must exist inside the workspace); a relative script_path is resolved against it."`
	PyScriptFields
	UseUV           *bool  `json:"use_uv,omitempty" jsonschema:"Default true: resolve dependencies with uv (python_version and auto_install_deps apply only then). false: the system interpreter, nothing installed."`
	PythonVersion   string `json:"python_version,omitempty" jsonschema:"Python version like 3.13 (installed interpreters only); applies only when use_uv is true."`
	AutoInstallDeps *bool  `json:"auto_install_deps,omitempty" jsonschema:"Default true: install what the script's PEP 723 block declares and, without a block, the packages its imports need that the interpreter lacks."`
	Rendering
}

// PyRunWithDepsInput is the input of py_run_script_with_dependencies.
type PyRunWithDepsInput struct {
	PyScriptFields
	PythonVersion             string   `json:"python_version,omitempty" jsonschema:"Python version (default 3.12 when installed, else the server's default interpreter; never downloaded)."`
	Dependencies              []string `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements to install into the run's environment."`
	AutoParseImports          *bool    `json:"auto_parse_imports,omitempty" jsonschema:"Default true: also install the packages the script's top-level imports need that the interpreter lacks (standard library and installed modules skipped; import names mapped to distributions, e.g. sklearn -> scikit-learn)."`
	IgnoreProjectRequirements *bool    `json:"ignore_project_requirements,omitempty" jsonschema:"Default true: do not run in the environment of a pyproject.toml project around the script."`
	Rendering
}

// PyBenchmarkInput is the input of py_benchmark_script.
type PyBenchmarkInput struct {
	PyScriptFields
	PythonVersion  string   `json:"python_version,omitempty" jsonschema:"Python version (default 3.12 when installed, else the server's default interpreter)."`
	Dependencies   []string `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements to install into the run's environment."`
	SampleInterval *float64 `json:"sample_interval,omitempty" jsonschema:"Accepted (default 0.05) and not needed: pyexec reads the exact peak RSS from the kernel instead of sampling."`
	Rendering
}

// PyRunOutput is RunScriptResult (or a job descriptor) plus what pyexec
// inferred.
type PyRunOutput struct {
	RunPythonOutput
	InferredDependencies []string `json:"inferred_dependencies,omitempty" jsonschema:"Packages installed because the script imports them (auto_parse_imports / auto_install_deps)."`
	Note                 string   `json:"note,omitempty" jsonschema:"What pyexec did differently from the seed, when it did (e.g. no Python 3.12 installed)."`
}

// PyRunWithDepsOutput is RunWithDepsResult plus what pyexec inferred.
type PyRunWithDepsOutput struct {
	RunWithDepsOutput
	InferredDependencies []string `json:"inferred_dependencies,omitempty" jsonschema:"Packages installed because the script imports them (auto_parse_imports)."`
	Note                 string   `json:"note,omitempty" jsonschema:"What pyexec did differently from the seed, when it did."`
}

// PyBenchmarkOutput is BenchmarkResult (its note also says what pyexec
// did differently from the seed's defaults, when it did).
type PyBenchmarkOutput struct {
	BenchmarkScriptOutput
}

// PyCleanupJobsInput is the input of py_cleanup_jobs.
type PyCleanupJobsInput struct {
	RemoveInline *bool `json:"remove_inline,omitempty" jsonschema:"Default true: also delete the autosaved inline code of the removed jobs."`
	OnlyFinished *bool `json:"only_finished,omitempty" jsonschema:"Default true. pyexec never removes pending or running jobs: false is accepted and changes nothing (cancel them first with py_kill_job)."`
	Rendering
}

// PySaveScriptInput is the input of py_save_script.
type PySaveScriptInput struct {
	ScriptName     string   `json:"script_name" jsonschema:"Name to save the script under (letters, digits, _ - .; at most 64)."`
	Source         string   `json:"source" jsonschema:"The script's Python source."`
	Dependencies   []string `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements, written into a PEP 723 header."`
	RequiresPython string   `json:"requires_python,omitempty" jsonschema:"requires-python for the PEP 723 header, like >=3.10."`
	Overwrite      bool     `json:"overwrite,omitempty" jsonschema:"Replace an existing script of that name (default false)."`
	Rendering
}

// PySaveScriptOutput is the seed's py_save_script payload.
type PySaveScriptOutput struct {
	Written string `json:"written" jsonschema:"\"true\" (a string, as in the seed)."`
	Path    string `json:"path" jsonschema:"Where the script was saved."`
	Message string `json:"message" jsonschema:"Script saved."`
}

// PyRunSavedScriptInput is the input of py_run_saved_script.
type PyRunSavedScriptInput struct {
	ScriptName      string            `json:"script_name" jsonschema:"Name of a saved script (py_list_scripts)."`
	Args            []string          `json:"args,omitempty" jsonschema:"Arguments passed to the script (sys.argv[1:])."`
	TimeoutSeconds  *float64          `json:"timeout_seconds,omitempty" jsonschema:"Timeout in seconds (default 300); 0 means no limit (capped at the server's maximum)."`
	EnvVars         map[string]string `json:"env_vars,omitempty" jsonschema:"Environment variables to set (override env_file)."`
	EnvFile         string            `json:"env_file,omitempty" jsonschema:"Path of a .env file inside the workspace, loaded before env_vars."`
	AsyncMode       bool              `json:"async_mode,omitempty" jsonschema:"Start the run as a background job and return its job_id at once (default false)."`
	JobLabel        string            `json:"job_label,omitempty" jsonschema:"Label for the background job."`
	AutoInstallDeps *bool             `json:"auto_install_deps,omitempty" jsonschema:"Default true: install what the script's PEP 723 header declares and, without one, the packages its imports need."`
	Rendering
}

// PyJobStatusInput is the input of py_job_status.
type PyJobStatusInput struct {
	JobID       string `json:"job_id" jsonschema:"The job id returned when the job was started."`
	Incremental *bool  `json:"incremental,omitempty" jsonschema:"Default true: the finished job's result holds only output not returned by an earlier py_job_status call for this job; false: all output from the start."`
	Rendering
}

// PyPruneJobsRealInput is py_prune_jobs with the running server's defaults.
type PyPruneJobsRealInput struct {
	KeepCompleted *bool    `json:"keep_completed,omitempty" jsonschema:"Keep completed jobs (default true)."`
	KeepFailed    *bool    `json:"keep_failed,omitempty" jsonschema:"Keep failed and cancelled jobs (default true)."`
	MaxAgeHours   *float64 `json:"max_age_hours,omitempty" jsonschema:"Only remove jobs that finished more than this many hours ago (default 24)."`
	Rendering
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

func (t *tools) registerPyExecMCPRealNames(srv *mcp.Server) {
	add := func(name, title, desc string, a *mcp.ToolAnnotations) *mcp.Tool {
		if a == nil {
			a = &mcp.ToolAnnotations{OpenWorldHint: ptr(true)}
		}
		return &mcp.Tool{Name: name, Title: title + " (python-executor-mcp)", Description: desc, Annotations: a}
	}
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	destructive := &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true}
	addTool(t, srv, add("py_run_script_in_dir", "Run a script in a directory",
		"Run an existing .py file or inline script_content in a workspace directory; returns stdout, stderr, exit_code, execution_strategy and elapsed_seconds, or a job descriptor when async_mode is set or the run outlives the sync budget.", nil), t.pyRunScriptInDir)
	addTool(t, srv, add("py_run_script_with_dependencies", "Run a script with dependencies",
		"Run script_content or script_path with dependencies (plus, with auto_parse_imports, the packages its imports need) on python_version; returns the run's output plus resolved_dependencies and python_version_used.", nil), t.pyRunScriptWithDependencies)
	addTool(t, srv, add("py_benchmark_script", "Benchmark a script",
		"Run code or a script once and report wall_time_seconds, cpu_time_seconds and peak_rss_mb (exact, from the kernel) with its output and resolved_dependencies.", nil), t.pyBenchmarkScript)
	if t.jobs != nil {
		addTool(t, srv, add("py_list_running_jobs", "List running jobs", "List the background jobs that are running or pending (finished ones: py_list_jobs), with the seed's string fields (running, exit_code, pid, elapsed_seconds, ...).", ro), t.listRunningJobs)
		addTool(t, srv, add("py_get_job_output", "Get a job's output", "A job's status (running or finished), output from the start, exit code and elapsed time.", ro), t.getJobOutput)
		addTool(t, srv, add("py_kill_job", "Kill a job", "Stop a running job: its whole process tree is killed; its output is kept.", destructive), t.killJob)
		addTool(t, srv, add("py_cleanup_jobs", "Clean up jobs", "Remove finished jobs with their logs and (remove_inline) the autosaved code of removed jobs; returns the counts of what was removed.", destructive), t.pyCleanupJobs)
	}
	if t.scripts != nil {
		addTool(t, srv, add("py_save_script", "Save a script", "Save source under script_name (with a PEP 723 header for dependencies / requires_python); an existing name is only replaced with overwrite.", &mcp.ToolAnnotations{IdempotentHint: true}), t.pySaveScript)
		addTool(t, srv, add("py_run_saved_script", "Run a saved script",
			"Run a script saved with py_save_script; returns RunScriptResult, or a job descriptor with async_mode or after the sync budget.", nil), t.pyRunSavedScript)
	}
}

// pythonOrDefault applies the seed's python_version default: 3.12 when it
// is installed, otherwise the server's default (said in the note).
func (t *tools) pythonOrDefault(ctx context.Context, asked string) (version, note string, err error) {
	if asked != "" {
		return asked, "", nil
	}
	info, err := t.ex.Info(ctx)
	if err != nil {
		return "", "", err
	}
	for _, it := range info.Interpreters {
		if it.Version == seedDefaultPython || strings.HasPrefix(it.Version, seedDefaultPython+".") {
			return seedDefaultPython, "", nil
		}
	}
	return "", fmt.Sprintf("python_version defaults to %s, which is not installed here (pyexec never downloads interpreters); ran Python %s, the server's default", seedDefaultPython, info.DefaultInterpreter.Version), nil
}

// addImports appends the packages r's imports need (imports.Infer).
func (t *tools) addImports(ctx context.Context, r *engine.Request) ([]string, error) {
	res, err := imports.Infer(ctx, t.ex, *r, r.Dependencies)
	if err != nil {
		return nil, err
	}
	r.Dependencies = append(r.Dependencies, res.Added...)
	return res.Added, nil
}

func joinNotes(notes ...string) string {
	return strings.Join(slices.DeleteFunc(notes, func(s string) bool { return s == "" }), "; ")
}

func (t *tools) pyRunScriptInDir(ctx context.Context, req *mcp.CallToolRequest, in PyRunScriptInDirInput) (*mcp.CallToolResult, PyRunOutput, error) {
	useUV := boolOr(in.UseUV, true)
	version := ""
	if useUV {
		version = in.PythonVersion
	}
	if in.Directory == "" {
		return nil, PyRunOutput{}, errors.New("directory: give the directory to run in")
	}
	f := in.PyScriptFields.seed()
	r, err := t.seedRequest(ctx, f, in.Directory, version)
	if err != nil {
		return nil, PyRunOutput{}, err
	}
	r.NoProject = !useUV // the seed's system-python strategy runs the plain interpreter
	var inferred []string
	if useUV && boolOr(in.AutoInstallDeps, true) {
		if inferred, err = t.addImports(ctx, &r); err != nil {
			return nil, PyRunOutput{}, err
		}
	}
	_, run, err := t.runSeed(ctx, req, "py_run_script_in_dir", r, f, Rendering{MarkdownOutput: ptr(true)})
	if err != nil {
		return nil, PyRunOutput{}, err
	}
	out := PyRunOutput{RunPythonOutput: run, InferredDependencies: inferred}
	return render(in.Rendering, out, func() string { return renderSeedRun(run, inferred, out.Note) }), out, nil
}

func (t *tools) pyRunScriptWithDependencies(ctx context.Context, req *mcp.CallToolRequest, in PyRunWithDepsInput) (*mcp.CallToolResult, PyRunWithDepsOutput, error) {
	version, note, err := t.pythonOrDefault(ctx, in.PythonVersion)
	if err != nil {
		return nil, PyRunWithDepsOutput{}, err
	}
	f := in.PyScriptFields.seed()
	r, err := t.seedRequest(ctx, f, "", version)
	if err != nil {
		return nil, PyRunWithDepsOutput{}, err
	}
	r.Dependencies = append(r.Dependencies, in.Dependencies...)
	r.NoProject = boolOr(in.IgnoreProjectRequirements, true)
	var inferred []string
	if boolOr(in.AutoParseImports, true) {
		if inferred, err = t.addImports(ctx, &r); err != nil {
			return nil, PyRunWithDepsOutput{}, err
		}
	}
	_, run, err := t.runSeed(ctx, req, "py_run_script_with_dependencies", r, f, Rendering{MarkdownOutput: ptr(true)})
	if err != nil {
		return nil, PyRunWithDepsOutput{}, err
	}
	out := PyRunWithDepsOutput{RunWithDepsOutput: RunWithDepsOutput{Result: run.Result, Handoff: run.Handoff, ResolvedDependencies: resolvedDependencies(run.Result)},
		InferredDependencies: inferred, Note: note}
	return render(in.Rendering, out, func() string { return renderSeedRun(run, inferred, note) }), out, nil
}

func (t *tools) pyBenchmarkScript(ctx context.Context, req *mcp.CallToolRequest, in PyBenchmarkInput) (*mcp.CallToolResult, PyBenchmarkOutput, error) {
	version, note, err := t.pythonOrDefault(ctx, in.PythonVersion)
	if err != nil {
		return nil, PyBenchmarkOutput{}, err
	}
	res, out, err := t.benchmarkScript(ctx, req, BenchmarkScriptInput{SeedScriptFields: in.PyScriptFields.seed(), PythonVersion: version,
		Dependencies: in.Dependencies, SampleInterval: in.SampleInterval, Rendering: in.Rendering})
	if err != nil {
		return nil, PyBenchmarkOutput{}, err
	}
	if note != "" {
		out.Note = joinNotes(out.Note, note)
		res = render(in.Rendering, out, func() string { return renderBenchmark(out.BenchmarkResult) })
	}
	return res, PyBenchmarkOutput{BenchmarkScriptOutput: out}, nil
}

func (t *tools) pyCleanupJobs(ctx context.Context, _ *mcp.CallToolRequest, in PyCleanupJobsInput) (*mcp.CallToolResult, map[string]int, error) {
	c, err := t.cleanupJobs(ctx, jobs.PruneOptions{}, boolOr(in.RemoveInline, true))
	if err != nil {
		return nil, nil, err
	}
	out := map[string]int{"removed_jobs": c.RemovedJobs, "removed_inline": c.RemovedAutosaved, "remaining_jobs": c.RemainingJobs}
	return render(in.Rendering, out, func() string {
		return fmt.Sprintf("Removed %d finished job(s) and %d autosaved inline script(s); %d job(s) remain.\n", c.RemovedJobs, c.RemovedAutosaved, c.RemainingJobs)
	}), out, nil
}

func (t *tools) pySaveScript(ctx context.Context, _ *mcp.CallToolRequest, in PySaveScriptInput) (*mcp.CallToolResult, PySaveScriptOutput, error) {
	e, err := t.scripts.SaveScript(ctx, scripts.SaveRequest{Name: in.ScriptName, Code: in.Source, Dependencies: in.Dependencies, RequiresPython: in.RequiresPython, Overwrite: in.Overwrite})
	if err != nil {
		// The store names its own fields; this tool's are script_name and
		// source. (A remote store's rejection is a RequestError.)
		rename := func(f string) string {
			if n := map[string]string{"name": "script_name", "code": "source"}[f]; n != "" {
				return n
			}
			return f
		}
		var fe *scripts.FieldError
		var re *engine.RequestError
		switch {
		case errors.As(err, &fe):
			return nil, PySaveScriptOutput{}, fmt.Errorf("%s: %w", rename(fe.Field), fe.Err)
		case errors.As(err, &re) && re.Field != "":
			return nil, PySaveScriptOutput{}, &engine.RequestError{Field: rename(re.Field), Message: re.Message}
		}
		return nil, PySaveScriptOutput{}, toolError(err)
	}
	out := PySaveScriptOutput{Written: "true", Path: e.Path, Message: "Script saved"}
	return render(in.Rendering, out, func() string {
		return fmt.Sprintf("Script saved as `%s` (%s). Run it with py_run_saved_script(script_name=%q).\n", e.Name, e.Path, e.Name)
	}), out, nil
}

func (t *tools) pyRunSavedScript(ctx context.Context, req *mcp.CallToolRequest, in PyRunSavedScriptInput) (*mcp.CallToolResult, PyRunOutput, error) {
	f := PyScriptFields{Args: in.Args, TimeoutSeconds: in.TimeoutSeconds, EnvVars: in.EnvVars, EnvFile: in.EnvFile, AsyncMode: in.AsyncMode, JobLabel: in.JobLabel}.seed()
	if f.AsyncMode && t.jobs == nil {
		return nil, PyRunOutput{}, errNoJobs
	}
	r := engine.Request{Args: f.Args, EnvVars: f.EnvVars, EnvFile: f.EnvFile}
	if in.ScriptName == "" {
		return nil, PyRunOutput{}, errors.New("script_name: give the name of a saved script (py_list_scripts shows them)")
	}
	if _, err := t.resolveScriptName(ctx, &r, in.ScriptName); err != nil {
		return nil, PyRunOutput{}, err
	}
	timeout, err := t.seedTimeout(ctx, f.TimeoutSeconds)
	if err != nil {
		return nil, PyRunOutput{}, err
	}
	r.Timeout = timeout
	var inferred []string
	if boolOr(in.AutoInstallDeps, true) {
		if inferred, err = t.addImports(ctx, &r); err != nil {
			return nil, PyRunOutput{}, err
		}
	} else {
		// The saved script's PEP 723 header is what declares its packages.
		meta, _ := uvenv.ParseScriptMetadata([]byte(r.Code))
		if meta.Found {
			r.Code = stripHeader(r.Code)
		}
	}
	run, err := t.runSaved(ctx, req, r, f)
	if err != nil {
		return nil, PyRunOutput{}, err
	}
	out := PyRunOutput{RunPythonOutput: run, InferredDependencies: inferred}
	return render(in.Rendering, out, func() string { return renderSeedRun(run, inferred, "") }), out, nil
}

// runSaved runs a saved script like runSeed, without autosaving it again
// (it is saved already).
func (t *tools) runSaved(ctx context.Context, req *mcp.CallToolRequest, r engine.Request, f SeedScriptFields) (RunPythonOutput, error) {
	if t.jobs != nil {
		mode := "sync"
		if f.AsyncMode {
			mode = "async"
		}
		_, out, err := t.jobs.runPython(ctx, req, RunPythonInput{Request: r, JobOptions: JobOptions{Mode: mode, JobLabel: f.JobLabel}, Rendering: Rendering{MarkdownOutput: ptr(true)}})
		return out, err
	}
	res, err := t.ex.Run(ctx, r, progressTo(ctx, req))
	return RunPythonOutput{Result: res}, err
}

// stripHeader removes a PEP 723 block's lines, keeping line numbers.
func stripHeader(code string) string {
	lines := strings.Split(code, "\n")
	in := false
	for i, l := range lines {
		switch {
		case !in && strings.TrimRight(l, " \t\r") == "# /// script":
			in, lines[i] = true, "#"
		case in && strings.TrimRight(l, " \t\r") == "# ///":
			in, lines[i] = false, "#"
		case in:
			lines[i] = "#"
		}
	}
	return strings.Join(lines, "\n")
}

func (t *tools) pyJobStatus(ctx context.Context, _ *mcp.CallToolRequest, in PyJobStatusInput) (*mcp.CallToolResult, PyJobStatusOutput, error) {
	j, err := t.jobs.ex.Job(ctx, in.JobID)
	if err != nil {
		return nil, PyJobStatusOutput{}, jobError(in.JobID, err)
	}
	j.Request = nil
	out := PyJobStatusOutput{Job: SeedJobStatus{Job: j}}
	if j.Status.Terminal() {
		from := jobs.Cursor{MaxBytes: snapshotBytes}
		if boolOr(in.Incremental, true) {
			from = t.jobs.statusCursor(j.ID)
		}
		ch, err := t.jobs.ex.Output(ctx, j.ID, from)
		if err != nil {
			return nil, PyJobStatusOutput{}, jobError(in.JobID, err)
		}
		if boolOr(in.Incremental, true) {
			t.jobs.setStatusCursor(j.ID, jobs.Cursor{StdoutOffset: ch.StdoutOffset, StderrOffset: ch.StderrOffset, MaxBytes: snapshotBytes})
		}
		out.Job.Result = &SeedJobResult{Stdout: ch.Stdout, Stderr: ch.Stderr, ExitCode: j.ExitCode}
	}
	return render(in.Rendering, out, func() string {
		s := jobLine(j) + "\n"
		if r := out.Job.Result; r != nil {
			var b strings.Builder
			writeStream(&b, "stdout", r.Stdout, int64(len(r.Stdout)), false)
			writeStream(&b, "stderr", r.Stderr, int64(len(r.Stderr)), false)
			s += b.String()
		}
		return s
	}), out, nil
}

func (t *tools) pyPruneJobsReal(ctx context.Context, req *mcp.CallToolRequest, in PyPruneJobsRealInput) (*mcp.CallToolResult, jobs.PruneResult, error) {
	age := 24.0
	if in.MaxAgeHours != nil {
		age = *in.MaxAgeHours
	}
	return t.jobs.pruneJobs(ctx, req, PruneJobsInput{KeepCompleted: boolOr(in.KeepCompleted, true), KeepFailed: boolOr(in.KeepFailed, true), MaxAgeHours: age, Rendering: in.Rendering})
}

// statusCursors remember, per job, how much output py_job_status has
// returned (its incremental reads).
type statusCursors struct {
	mu sync.Mutex
	m  map[string]jobs.Cursor
}

func (jt *jobTools) statusCursor(id string) jobs.Cursor {
	jt.cursors.mu.Lock()
	defer jt.cursors.mu.Unlock()
	c, ok := jt.cursors.m[id]
	if !ok {
		c = jobs.Cursor{MaxBytes: snapshotBytes}
	}
	return c
}

func (jt *jobTools) setStatusCursor(id string, c jobs.Cursor) {
	jt.cursors.mu.Lock()
	defer jt.cursors.mu.Unlock()
	if jt.cursors.m == nil || len(jt.cursors.m) > 10000 {
		jt.cursors.m = map[string]jobs.Cursor{}
	}
	jt.cursors.m[id] = c
}

// renderSeedRun is a py_ run tool's markdown: the run (or handoff) plus
// what was inferred.
func renderSeedRun(run RunPythonOutput, inferred []string, note string) string {
	var b strings.Builder
	if run.JobID != "" {
		b.WriteString("**" + run.Message + "**\n")
	} else {
		b.WriteString(renderResult(run.Result))
	}
	if len(inferred) > 0 {
		fmt.Fprintf(&b, "\ninstalled for its imports: %s\n", strings.Join(inferred, ", "))
	}
	if note != "" {
		fmt.Fprintf(&b, "\nnote: %s\n", note)
	}
	return b.String()
}

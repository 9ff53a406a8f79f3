package mcpserver

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
)

// python-executor-mcp seed adapters. Its parameters map onto a run request:
// directory -> cwd, script_content -> code, timeout_seconds (0 = no limit)
// -> timeout (0 becomes the server's maximum: every pyexec run has a
// limit). use_uv is accepted: pyexec resolves interpreters and environments
// itself, so uv is used where it is needed (dependencies), and
// execution_strategy reports what actually ran. Inline script_content is
// autosaved like run_python's code.

// SeedScriptFields are the parameters the seed's run tools share.
type SeedScriptFields struct {
	ScriptPath     string            `json:"script_path,omitempty" jsonschema:"Existing .py file (absolute, or relative to directory / the workspace), inside the workspace. Give script_path or script_content."`
	ScriptContent  string            `json:"script_content,omitempty" jsonschema:"Inline Python source (autosaved; see list_scripts). Give script_path or script_content."`
	Args           []string          `json:"args,omitempty" jsonschema:"Arguments passed to the script (sys.argv[1:])."`
	TimeoutSeconds *float64          `json:"timeout_seconds,omitempty" jsonschema:"Timeout in seconds; 0 means no limit, which pyexec caps at the server's maximum. Default: the server's default timeout."`
	EnvVars        map[string]string `json:"env_vars,omitempty" jsonschema:"Environment variables to set (override env_file)."`
	EnvFile        string            `json:"env_file,omitempty" jsonschema:"Path of a .env file (python-dotenv format) inside the workspace, loaded before env_vars."`
	AsyncMode      bool              `json:"async_mode,omitempty" jsonschema:"Start the run as a background job and return its job_id at once (needs background jobs in this build)."`
	JobLabel       string            `json:"job_label,omitempty" jsonschema:"Label for the background job (with async_mode or a smart-async switch)."`
}

// RunScriptInDirInput is the input of run_script_in_dir.
type RunScriptInDirInput struct {
	Directory string `json:"directory" jsonschema:"Directory to run in (must exist inside the workspace); a relative script_path is resolved against it."`
	SeedScriptFields
	UseUV         bool   `json:"use_uv,omitempty" jsonschema:"Accepted for compatibility: pyexec uses uv only where it is needed; python_version applies only when use_uv is true, as in the seed."`
	PythonVersion string `json:"python_version,omitempty" jsonschema:"Python version like 3.13 (installed interpreters only); applies only when use_uv is true."`
	Rendering
}

// RunWithDepsInput is the input of run_script_with_dependencies.
type RunWithDepsInput struct {
	SeedScriptFields
	PythonVersion string   `json:"python_version,omitempty" jsonschema:"Python version like 3.13 (installed interpreters only)."`
	Dependencies  []string `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements to install into the run's environment."`
	Rendering
}

// RunWithDepsOutput is the result of run_script_with_dependencies.
type RunWithDepsOutput struct {
	engine.Result
	Handoff
	ResolvedDependencies []string `json:"resolved_dependencies" jsonschema:"Exact name==version of the installed dependencies (empty without dependencies)."`
}

// BenchmarkScriptInput is the input of benchmark_script.
type BenchmarkScriptInput struct {
	SeedScriptFields
	PythonVersion  string   `json:"python_version,omitempty" jsonschema:"Python version like 3.13 (installed interpreters only)."`
	Dependencies   []string `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements to install into the run's environment."`
	SampleInterval *float64 `json:"sample_interval,omitempty" jsonschema:"Accepted and ignored: pyexec reads the exact peak RSS from the kernel instead of sampling."`
	Rendering
}

// BenchmarkScriptOutput is the result of benchmark_script.
type BenchmarkScriptOutput struct {
	executor.BenchmarkResult
	ResolvedDependencies []string `json:"resolved_dependencies" jsonschema:"Exact name==version of the installed dependencies (empty without dependencies)."`
}

// PyListScriptsInput is the input of py_list_scripts (the seed's names).
type PyListScriptsInput struct {
	IncludeAutosaved bool `json:"include_autosaved,omitempty" jsonschema:"Also list autosaved inline runs (default false)."`
	Rendering
}

// PyViewScriptInput is the input of py_view_script.
type PyViewScriptInput struct {
	ScriptName string `json:"script_name" jsonschema:"Name of the script (as py_list_scripts shows it)."`
	Autosaved  bool   `json:"autosaved,omitempty" jsonschema:"Look among autosaved inline runs (default false)."`
	Rendering
}

func (t *tools) registerPyExecMCPCompat(srv *mcp.Server) {
	addTool(t, srv, &mcp.Tool{
		Name:         "run_script_in_dir",
		Title:        "Run a script in a directory (python-executor-mcp compatible)",
		Description:  "Run an existing .py file or inline script_content in a directory of the workspace and return stdout, stderr, exit_code, execution_strategy and elapsed_seconds.",
		Annotations:  &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
		OutputSchema: runPythonOutputSchema(),
	}, t.runScriptInDir)
	addTool(t, srv, &mcp.Tool{
		Name:        "run_script_with_dependencies",
		Title:       "Run a script with dependencies (python-executor-mcp compatible)",
		Description: "Run inline script_content or a script_path with explicit dependencies and a Python version; returns the run's output plus resolved_dependencies and python_version_used.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.runScriptWithDependencies)
	addTool(t, srv, &mcp.Tool{
		Name:  "benchmark_script",
		Title: "Benchmark a script (python-executor-mcp compatible)",
		Description: "Run code or a script once and report wall_time_seconds, cpu_time_seconds and peak_rss_mb (exact, from the kernel; not sampled) with its output. " +
			"For repeated runs, statistics and profiles use benchmark_python.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.benchmarkScript)
	if t.scripts != nil {
		addTool(t, srv, &mcp.Tool{
			Name:        "py_list_scripts",
			Title:       "List saved scripts (python-executor-mcp compatible)",
			Description: "List saved scripts; include_autosaved also lists the autosaved inline runs. Same as list_scripts.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		}, t.pyListScripts)
		addTool(t, srv, &mcp.Tool{
			Name:        "py_view_script",
			Title:       "View a saved script (python-executor-mcp compatible)",
			Description: "Show a saved script (or, with autosaved, an autosaved inline run with its metadata sidecar). Same as view_script.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		}, t.pyViewScript)
	}
}

// seedRequest builds the run request shared by the seed's run tools.
func (t *tools) seedRequest(ctx context.Context, f SeedScriptFields, cwd, pythonVersion string) (engine.Request, error) {
	if f.AsyncMode && t.jobs == nil {
		return engine.Request{}, errNoJobs
	}
	r := engine.Request{Args: f.Args, Cwd: cwd, PythonVersion: pythonVersion, EnvVars: f.EnvVars, EnvFile: f.EnvFile}
	if err := seedSource(&r, f.ScriptPath, f.ScriptContent); err != nil {
		return engine.Request{}, err
	}
	timeout, err := t.seedTimeout(ctx, f.TimeoutSeconds)
	if err != nil {
		return engine.Request{}, err
	}
	r.Timeout = timeout
	return r, nil
}

func (t *tools) runScriptInDir(ctx context.Context, req *mcp.CallToolRequest, in RunScriptInDirInput) (*mcp.CallToolResult, RunPythonOutput, error) {
	version := ""
	if in.UseUV {
		version = in.PythonVersion
	}
	r, err := t.seedRequest(ctx, in.SeedScriptFields, in.Directory, version)
	if err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	return t.runSeed(ctx, req, "run_script_in_dir", r, in.SeedScriptFields, in.Rendering)
}

// runSeed runs a seed tool's request: with background jobs as the seed's
// smart-async did (a sync run still going after the budget continues as a
// job and returns its job_id; async_mode starts a job at once), otherwise
// synchronously. The inline code is autosaved with the job id, if any.
func (t *tools) runSeed(ctx context.Context, req *mcp.CallToolRequest, tool string, r engine.Request, f SeedScriptFields, rendering Rendering) (*mcp.CallToolResult, RunPythonOutput, error) {
	if t.jobs != nil {
		mode := "sync"
		if f.AsyncMode {
			mode = "async"
		}
		res, out, err := t.jobs.runPython(ctx, req, RunPythonInput{Request: r, JobOptions: JobOptions{Mode: mode, JobLabel: f.JobLabel}, Rendering: rendering})
		if err == nil {
			t.autosave(tool, r, out.JobID)
		}
		return res, out, err
	}
	t.autosave(tool, r, "")
	res, err := t.ex.Run(ctx, r, progressTo(ctx, req))
	if err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	out := RunPythonOutput{Result: res}
	return render(rendering, out, func() string { return renderResult(res) }), out, nil
}

func (t *tools) runScriptWithDependencies(ctx context.Context, req *mcp.CallToolRequest, in RunWithDepsInput) (*mcp.CallToolResult, RunWithDepsOutput, error) {
	r, err := t.seedRequest(ctx, in.SeedScriptFields, "", in.PythonVersion)
	if err != nil {
		return nil, RunWithDepsOutput{}, toolError(err)
	}
	if err := applyDependencies(&r, in.Dependencies); err != nil {
		return nil, RunWithDepsOutput{}, toolError(err)
	}
	res, run, err := t.runSeed(ctx, req, "run_script_with_dependencies", r, in.SeedScriptFields, in.Rendering)
	if err != nil {
		return nil, RunWithDepsOutput{}, toolError(err)
	}
	out := RunWithDepsOutput{Result: run.Result, Handoff: run.Handoff, ResolvedDependencies: resolvedDependencies(run.Result)}
	if !in.Rendering.markdown() {
		res = render(in.Rendering, out, nil) // the JSON must show this tool's fields
	}
	return res, out, nil
}

func (t *tools) benchmarkScript(ctx context.Context, req *mcp.CallToolRequest, in BenchmarkScriptInput) (*mcp.CallToolResult, BenchmarkScriptOutput, error) {
	if in.AsyncMode {
		return nil, BenchmarkScriptOutput{}, errors.New("async_mode: benchmarks run synchronously (their measurements are the result); call without async_mode")
	}
	r, err := t.seedRequest(ctx, in.SeedScriptFields, "", in.PythonVersion)
	if err != nil {
		return nil, BenchmarkScriptOutput{}, toolError(err)
	}
	if err := applyDependencies(&r, in.Dependencies); err != nil {
		return nil, BenchmarkScriptOutput{}, toolError(err)
	}
	t.autosave("benchmark_script", r, "")
	// The seed measured one run; so does this adapter.
	zero := 0
	res, err := executor.Benchmark(ctx, t.ex, executor.BenchmarkRequest{Request: r, Repeat: 1, Warmup: &zero}, progressTo(ctx, req))
	if err != nil {
		return nil, BenchmarkScriptOutput{}, toolError(err)
	}
	if in.SampleInterval != nil {
		note := "sample_interval is ignored: peak RSS is the kernel's exact accounting of the run's process tree, not a sample"
		if res.Note != "" {
			note = res.Note + "; " + note
		}
		res.Note = note
	}
	out := BenchmarkScriptOutput{BenchmarkResult: res, ResolvedDependencies: resolvedDependencies(res.Result)}
	return render(in.Rendering, out, func() string { return renderBenchmark(res) }), out, nil
}

func (t *tools) pyListScripts(ctx context.Context, req *mcp.CallToolRequest, in PyListScriptsInput) (*mcp.CallToolResult, ListScriptsOutput, error) {
	return t.listScripts(ctx, req, ListScriptsInput{IncludeAutosaved: in.IncludeAutosaved, Rendering: in.Rendering})
}

func (t *tools) pyViewScript(ctx context.Context, req *mcp.CallToolRequest, in PyViewScriptInput) (*mcp.CallToolResult, ViewScriptOutput, error) {
	return t.viewScript(ctx, req, ViewScriptInput{Name: in.ScriptName, Autosaved: in.Autosaved, Rendering: in.Rendering})
}

package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/present"
)

type tools struct {
	ex      executor.Executor
	log     *slog.Logger
	scripts executor.Scripts // nil: no scripts toolset, no autosave
	jobs    *jobTools        // nil when the executor has no background jobs (or no toolset needs them)
	// jobsRegistered: the jobs toolset (tools and job:// resources) is on.
	jobsRegistered bool
	// sessionsOn: the sessions toolset is on and the executor keeps sessions.
	sessionsOn bool
	// resultChars and resultCap: a result's default size in characters,
	// and the most a call may ask for (present.Budget).
	resultChars, resultCap int
	tasks                  *taskStore // MCP Tasks (tasks.go); nil without the core toolset
	// inputs are the registered tools' input schemas (arguments.go).
	inputs map[string]*jsonschema.Schema
}

// Rendering is shared by every tool: content is markdown for the model to
// read unless the caller asks for the JSON instead.
type Rendering struct {
	MarkdownOutput *bool `json:"markdown_output,omitempty" jsonschema:"When true (default) the text content is a short markdown rendering; when false it is the JSON of the structured result."`
}

func (r Rendering) markdown() bool { return r.MarkdownOutput == nil || *r.MarkdownOutput }

// RunPythonInput is the input of run_python.
type RunPythonInput struct {
	engine.Request
	ScriptName string `json:"script_name,omitempty" jsonschema:"Name of a script saved with save_script to run instead of code or script_path (list_scripts shows them)."`
	Session    string `json:"session,omitempty" jsonschema:"Run the code as a cell in this live session (1-64 characters of A-Z a-z 0-9 _ . -): variables, imports and data persist between calls with the same session. A name not in use creates the session with this call's settings (session_created: true). Later calls may add dependencies (installed into the session's own overlay, imported at once); other settings are fixed. A cell shows what a notebook shows: plt.show() and figures still open at its end (then closed) come back as images, display(obj) any number of times, and a last expression with rich reprs (a DataFrame, a PIL image, a figure) in rich form; it also lists the workspace files it changed. A cell still running after the sync budget returns a job_id with the output so far (get_job reads the rest; the session stays busy until it ends); mode async starts it as a job. Such a job-backed cell is limited like a run_python job: by timeout when it is shorter than the server's job timeout (--job-timeout, default 3600 s), else by the job timeout. Without session the run shares nothing with other calls."`
	JobOptions
	OutputBudget
	Rendering
}

// RunPythonOutput is the structured result of run_python. Its streams and
// displays are cut to the same budget as the text content.
type RunPythonOutput struct {
	engine.Result
	Handoff
	present.Extra
	SessionCell
}

// RunPythonBatchInput is the input of run_python_batch.
type RunPythonBatchInput struct {
	Codes      []string         `json:"codes,omitempty" jsonschema:"Python snippets to run in parallel (at most 20, each at most 1 MiB). Give codes or requests."`
	Requests   []engine.Request `json:"requests,omitempty" jsonschema:"Full run requests (as run_python takes) to run in parallel (at most 20). Give codes or requests."`
	Timeout    float64          `json:"timeout,omitempty" jsonschema:"Timeout in seconds for each snippet that does not set its own (default 30)."`
	MaxWorkers int              `json:"max_workers,omitempty" jsonschema:"Most snippets run at once (default: the server's core count, capped by its --max-workers)."`
	Cwd        string           `json:"cwd,omitempty" jsonschema:"Working directory (inside the workspace) for each snippet that does not set its own."`
	BatchJobOptions
	OutputBudget
	Rendering
}

// ServerInfoInput is the (empty) input of server_info.
type ServerInfoInput struct {
	Rendering
}

// registerCore registers the core toolset.
func (t *tools) registerCore(srv *mcp.Server) {
	addTool(t, srv, &mcp.Tool{
		Name:  "run_python",
		Title: "Run Python",
		Description: "Run Python code (or a .py file in the workspace) and return its stdout, stderr and exit code. " +
			"The code is written to a file and run as `python -u FILE ARGS...` with no shell, so quotes, $ and backslashes reach Python untouched. " +
			"Supports args, stdin, cwd, env_vars, env_file, a choice of interpreter (python path or python_version) and a timeout that kills the whole process tree. " +
			"Packages: list them in dependencies (PEP 508) or in a PEP 723 `# /// script` block; they are installed once with uv into a cached environment, so repeated calls start as fast as plain Python. " +
			"A script inside a pyproject.toml project runs in that project's environment. " +
			"Each call without session is a fresh process that shares nothing with other calls (a variable set in one call is gone in the next). " +
			"Pass session=NAME to run the code as a cell of a live session instead: variables, imports and loaded data persist across calls, the last expression's value is returned as result (and in rich form when it has one, like a DataFrame or a figure), plots and display() come back as images and tables as in a plain run, and an exception ends the cell, not the session.",
		Annotations:  &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
		OutputSchema: runPythonOutputSchema(),
	}, t.runPython)
	addTool(t, srv, &mcp.Tool{
		Name:  "run_python_batch",
		Title: "Run Python snippets in parallel",
		Description: "Run up to 20 independent Python snippets in parallel and return their results in input order. " +
			"One failing or timed-out snippet never fails the batch. Do not use it for snippets that depend on each other.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.runPythonBatch)
	addTool(t, srv, &mcp.Tool{
		Name:        "server_info",
		Title:       "pyexec server information",
		Description: "Describe this pyexec server: version, workspace, installed interpreters, uv, and the limits runs are held to.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.serverInfo)
	t.registerBenchmark(srv)
	t.registerPlanning(srv)
}

func (t *tools) runPython(ctx context.Context, req *mcp.CallToolRequest, in RunPythonInput) (*mcp.CallToolResult, RunPythonOutput, error) {
	if in.Session != "" {
		return t.runInSession(ctx, req, in)
	}
	inline, err := t.resolveScriptName(ctx, &in.Request, in.ScriptName)
	if err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	if t.jobs != nil {
		// Sync with smart-async handoff, or async. Autosaved afterwards, so
		// the sidecar names the job when there is one.
		res, out, err := t.jobs.runPython(ctx, req, in)
		if inline && err == nil {
			t.autosave("run_python", in.Request, out.JobID)
		}
		return res, out, err
	}
	if err := in.JobOptions.check(false); err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	budget, err := t.budget(in.OutputBudget)
	if err != nil {
		return nil, RunPythonOutput{}, err
	}
	if inline {
		t.autosave("run_python", in.Request, "")
	}
	res, err := t.ex.Run(ctx, in.Request, progressTo(ctx, req))
	if err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	r, out := t.presentRun(in, res, budget)
	return r, out, nil
}

func (t *tools) runPythonBatch(ctx context.Context, req *mcp.CallToolRequest, in RunPythonBatchInput) (*mcp.CallToolResult, BatchOutput, error) {
	budget, err := t.budget(in.OutputBudget)
	if err != nil {
		return nil, BatchOutput{}, err
	}
	var reqs []engine.Request
	switch {
	case len(in.Codes) > 0 && len(in.Requests) > 0:
		return nil, BatchOutput{}, fmt.Errorf("codes: give either codes or requests, not both")
	case len(in.Codes) > 0:
		for _, code := range in.Codes {
			reqs = append(reqs, engine.Request{Code: code})
		}
	default:
		reqs = in.Requests
	}
	for i := range reqs {
		if reqs[i].Timeout == 0 {
			reqs[i].Timeout = in.Timeout
		}
		if reqs[i].Cwd == "" {
			reqs[i].Cwd = in.Cwd
		}
	}
	if in.Mode != "" && in.Mode != "sync" {
		res, out, err := t.jobs.startBatch(ctx, in, reqs) // mode async: one background job per entry
		if err == nil {
			t.autosaveBatch(reqs, out)
		}
		items := make([]BatchOutputItem, len(out.Results))
		for i, it := range out.Results {
			items[i] = BatchOutputItem{BatchItem: it}
		}
		return res, BatchOutput{Results: items}, err
	}
	out, err := t.ex.Batch(ctx, executor.BatchRequest{Requests: reqs, MaxWorkers: in.MaxWorkers, OutputBudget: budget}, progressTo(ctx, req))
	if err != nil {
		return nil, BatchOutput{}, toolError(err)
	}
	t.autosaveBatch(reqs, out)
	res, view := t.presentBatch(in.Rendering, reqs, out, budget)
	return res, view, nil
}

func (t *tools) serverInfo(ctx context.Context, req *mcp.CallToolRequest, in ServerInfoInput) (*mcp.CallToolResult, executor.Info, error) {
	info, err := t.ex.Info(ctx)
	if err != nil {
		return nil, executor.Info{}, toolError(err)
	}
	if t.jobs != nil && t.jobs.budget > 0 {
		info.Limits.SyncBudgetSeconds = t.jobs.budget.Seconds()
	}
	info.Limits.Timeouts = executor.TimeoutStory(info.Limits) // with this front end's sync budget
	return render(in.Rendering, info, func() string { return renderInfo(info) }), info, nil
}

// render builds the text content: markdown, or the JSON of out.
func render(r Rendering, out any, md func() string) *mcp.CallToolResult {
	text := ""
	if r.markdown() {
		text = md()
	} else {
		b, err := json.Marshal(out)
		if err != nil {
			text = fmt.Sprintf("cannot render result: %v", err)
		} else {
			text = string(b)
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// progressTo forwards executor heartbeats as MCP progress notifications when
// the client asked for them with a progress token.
func progressTo(ctx context.Context, req *mcp.CallToolRequest) executor.ProgressFunc {
	token := req.Params.GetProgressToken()
	tk := taskFrom(ctx) // a task-augmented call (tasks.go)
	if token == nil || req.Session == nil {
		if tk != nil {
			return func(p executor.Progress) { tk.progressed(p.Message) }
		}
		return nil
	}
	return func(p executor.Progress) {
		// Elapsed seconds always increase, as the protocol asks of progress;
		// the message carries the details (bytes, batch entries done).
		params := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p.ElapsedSeconds, Message: p.Message}
		if tk != nil {
			tk.progressed(p.Message)
			params.Meta = tk.relatedMeta()
		}
		_ = req.Session.NotifyProgress(ctx, params)
	}
}

func ptr[T any](v T) *T { return &v }

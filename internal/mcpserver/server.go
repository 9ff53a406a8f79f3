// Package mcpserver exposes an Executor as MCP tools (official go-sdk). It
// never runs Python itself and never knows whether the executor is the local
// engine or a remote execution server.
package mcpserver

import (
	"log/slog"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/present"
)

// Options configure the MCP server.
type Options struct {
	Version string
	Logger  *slog.Logger
	// SyncBudget is how long a sync run_python waits before handing the run
	// off to a background job (executors with jobs only; default 20 s).
	SyncBudget time.Duration
	// Toolsets to register (see ParseToolsets); nil means DefaultToolsets.
	Toolsets []string
	// Scripts is where saved and autosaved scripts live: the executing
	// side's store (executor.LocalScripts, or the remote httpapi.Client).
	// Without it the scripts tools are not registered, run_python rejects
	// script_name, and nothing is autosaved.
	Scripts executor.Scripts
	// MaxResultChars is the characters a tool result carries by default
	// (0: present.DefaultBudget); MaxResultCap is the most a call's
	// max_output_chars may ask for (0: 10x the default).
	MaxResultChars, MaxResultCap int
	// SessionID, when set, mints MCP session ids (Streamable HTTP): a
	// replica set names the creating replica in them, so any replica can
	// route a session's requests to it (internal/cluster).
	SessionID func() string
}

const instructions = `pyexec runs Python for you without any shell quoting: pass source in "code" (or a workspace file in "script_path") and it is written to a file and run as "python -u FILE". ` +
	`Use run_python for one run, run_python_batch for up to 20 independent snippets in parallel, server_info to see the workspace, interpreters and limits. ` +
	`Every run has a hard timeout that kills its whole process tree; partial output is kept.`

// toolsetInstructions tells the model about the tools a toolset adds.
func toolsetInstructions(ts string) string {
	switch ts {
	case ToolsetCore:
		return ` benchmark_python measures repeated runs (wall, CPU, exact peak memory; profile: true adds a cProfile table). ` +
			`plan_batch suggests workers and chunks for run_python_batch; chunk_code splits long code on line boundaries.`
	case ToolsetScripts:
		return ` save_script stores code by name with its dependencies (run it with script_name); list_scripts and view_script show saved scripts and the autosaved code of recent inline runs.`
	case ToolsetCompat:
		return ` The tools of the uv-exec-mcp, py-executor and python-executor-mcp servers are also available under their own names.`
	case ToolsetQuality:
		return ` format_code and lint_code check code or a workspace file with ruff (lint select ["S"]: security rules); files change only with write: true.`
	case ToolsetFiles:
		return ` write_file puts data or code into the workspace, read_file and list_files get results back (a run's result lists the files it wrote).`
	case ToolsetSessions:
		return ` Plain runs share nothing between calls. For iterative work (load data once, then explore it), pass session=NAME to run_python: the code runs as a cell in a live session whose variables and imports persist; dependencies on a later call (or pip install in a cell) install into that session alone; a long cell becomes a job (get_job) and the session stays busy until it ends; session_list, session_interrupt, session_reset and session_close manage sessions.`
	case ToolsetEnvs:
		return ` For packages used across many calls, env_create builds a named environment once; then pass env: NAME to run_python.`
	}
	return ""
}

// New builds an MCP server whose tools call ex.
func New(ex executor.Executor, opts Options) *mcp.Server {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := &tools{ex: ex, log: logger, scripts: opts.Scripts, resultChars: opts.MaxResultChars, resultCap: max(opts.MaxResultCap, 10*max(opts.MaxResultChars, present.DefaultBudget))}
	sopts := &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       logger,
		GetSessionID: opts.SessionID,
	}
	sets := opts.Toolsets
	if sets == nil {
		sets, _ = ParseToolsets(DefaultToolsets)
	}
	for _, ts := range []string{ToolsetCore, ToolsetScripts, ToolsetQuality, ToolsetEnvs, ToolsetSessions, ToolsetCompat} {
		if slices.Contains(sets, ts) && (ts != ToolsetScripts || opts.Scripts != nil) {
			sopts.Instructions += toolsetInstructions(ts)
		}
	}
	if slices.Contains(sets, ToolsetJobs) || slices.Contains(sets, ToolsetCompat) {
		// Background jobs serve the job tools and the seeds' async tools;
		// without either toolset every run is synchronous.
		newJobTools(t, ex, opts, sopts) // sets t.jobs unless ex has no jobs
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "pyexec", Title: "pyexec: fast, confined Python execution", Version: opts.Version}, sopts)
	t.registerToolsets(srv, sets)
	t.registerTasks(srv, sets)
	// Added last, so outermost: arguments are checked before anything,
	// task-augmented calls included.
	srv.AddReceivingMiddleware(t.checkArgumentsMiddleware)
	return srv
}

// Package mcpserver exposes an Executor as MCP tools (official go-sdk). It
// never runs Python itself and never knows whether the executor is the local
// engine or a remote execution server.
package mcpserver

import (
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/executor"
)

// Options configure the MCP server.
type Options struct {
	Version string
	Logger  *slog.Logger
	// SyncBudget is how long a sync run_python waits before handing the run
	// off to a background job (executors with jobs only; default 20 s).
	SyncBudget time.Duration
}

const instructions = `pyexec runs Python for you without any shell quoting: pass source in "code" (or a workspace file in "script_path") and it is written to a file and run as "python -u FILE". ` +
	`Use run_python for one run, run_python_batch for up to 20 independent snippets in parallel, server_info to see the workspace, interpreters and limits. ` +
	`Every run has a hard timeout that kills its whole process tree; partial output is kept.`

// New builds an MCP server whose tools call ex.
func New(ex executor.Executor, opts Options) *mcp.Server {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := &tools{ex: ex, log: logger}
	sopts := &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       logger,
	}
	jt := newJobTools(t, ex, opts, sopts) // nil unless ex runs background jobs
	srv := mcp.NewServer(&mcp.Implementation{Name: "pyexec", Title: "pyexec: fast, confined Python execution", Version: opts.Version}, sopts)
	t.register(srv)
	jt.register(srv)
	return srv
}

package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/mcpserver"
)

// mcpAliases add the uv-exec-mcp seed's MCP-client variables.
var mcpAliases = withJobAliases(map[string][]string{
	"max-timeout":  {"MAX_SCRIPT_TIMEOUT"},
	"executor":     {"EXECUTION_SERVER_URL"},
	"http-timeout": {"MCP_HTTP_TIMEOUT"},
})

// runMCP serves MCP over stdio. Only JSON-RPC reaches stdout: logs go to
// stderr, and runs never inherit the server's standard streams. With
// --executor URL every tool call (runs and jobs) is delegated to a remote
// `pyexec serve` (the seed's two-server setup); the tools behave the same
// either way.
func runMCP(ctx context.Context, args []string, _, stderr io.Writer) int {
	var (
		ef          engineFlags
		jf          jobFlags
		mf          mcpFlags
		logLevel    string
		remote      string
		token       string
		httpTimeout float64
	)
	fs := newFlagSet("mcp", "mcp [flags]", stderr, mcpAliases)
	ef.register(fs)
	jf.register(fs)
	mf.register(fs)
	fs.StringVar(&logLevel, "log-level", "info", "log level on stderr: debug, info, warn, error")
	fs.StringVar(&remote, "executor", "", "URL of a `pyexec serve` execution server to delegate runs and jobs to (default: run in this process; engine and job flags other than --sync-budget then apply on the server)")
	fs.StringVar(&token, "token", "", "bearer token of the execution server (with --executor)")
	fs.Float64Var(&httpTimeout, "http-timeout", httpapi.DefaultTimeoutBuffer.Seconds(), "seconds added to a run's timeout for the HTTP call to the execution server; also how long it may stay silent (with --executor)")
	if code, ok := parseFlags(fs, args, mcpAliases, stderr); !ok {
		return code
	}
	logger := newLogger(stderr, logLevel)
	// The MCP front end keeps its own state (saved and autosaved scripts),
	// also when runs are delegated to an execution server.
	stateDir := ef.stateDir
	var ex executor.Executor
	if remote != "" {
		c, err := httpapi.NewClient(remote, httpapi.ClientOptions{Token: token, TimeoutBuffer: seconds(httpTimeout)})
		if err != nil {
			fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
			return 2
		}
		ex = c
		// Like the seed's MCP client, start even when the server is down
		// (each call then says so); just tell the operator now.
		hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if info, err := c.Info(hctx); err != nil {
			logger.Warn("execution server not reachable yet", "url", c.URL(), "err", err)
		} else {
			logger.Info("pyexec MCP server on stdio, delegating to an execution server", "version", Version, "url", c.URL(), "server_version", info.Version, "workspace", info.Workspace)
		}
		cancel()
	} else {
		jx, closeLocal, err := openLocal(ctx, &ef, &jf, logger)
		if err != nil {
			fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
			return 1
		}
		defer closeLocal()
		cfg := jx.Engine().Config()
		stateDir = cfg.StateDir
		logger.Info("pyexec MCP server on stdio", "version", Version, "workspace", cfg.Workspace, "state_dir", cfg.StateDir)
		ex = jx
	}
	toolsets, store, err := mf.open(stateDir, logger)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
		return 2
	}
	defer store.Close()
	logger.Debug("MCP tools", "toolsets", toolsets)
	srv := mcpserver.New(ex, mcpserver.Options{Version: Version, Logger: logger, SyncBudget: jf.budget(), Toolsets: toolsets, Scripts: store, MaxResultChars: jf.resultChars})
	if err := srv.Run(ctx, mcpserver.TaskTransport(&mcp.StdioTransport{})); err != nil && ctx.Err() == nil {
		logger.Error("MCP server stopped", "err", err)
		return 1
	}
	return 0
}

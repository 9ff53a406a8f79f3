package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/mcpserver"
)

// runMCP serves MCP over stdio. Only JSON-RPC reaches stdout: logs go to
// stderr, and runs never inherit the server's standard streams.
func runMCP(ctx context.Context, args []string, _, stderr io.Writer) int {
	var ef engineFlags
	var jf jobFlags
	var logLevel string
	aliases := withJobAliases(engineAliases)
	fs := newFlagSet("mcp", "mcp [flags]", stderr, aliases)
	ef.register(fs)
	jf.register(fs)
	fs.StringVar(&logLevel, "log-level", "info", "log level on stderr: debug, info, warn, error")
	if code, ok := parseFlags(fs, args, aliases, stderr); !ok {
		return code
	}
	logger := newLogger(stderr, logLevel)
	ex, err := ef.executor()
	if err != nil {
		fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
		return 1
	}
	defer ex.Engine().Close() // after the jobs: stops warm interpreters, lets new environments finish sealing
	cfg := ex.Engine().Config()
	logger.Info("pyexec MCP server on stdio", "version", Version, "workspace", cfg.Workspace, "state_dir", cfg.StateDir)
	if why := engine.WarmIneligible(cfg.Sandbox); ef.warm > 0 && why != "" {
		logger.Info("warm interpreters stay unused: runs start cold", "why", why, "warm_needs", "--sandbox none --memory-limit -1 --max-procs -1")
	}
	jx, err := jf.open(ctx, ex, logger)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
		return 1
	}
	defer func() {
		// Running jobs are killed and recorded as failed ("server shut down").
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := jx.Close(stopCtx); err != nil {
			logger.Error("closing jobs", "err", err)
		}
	}()
	srv := mcpserver.New(jx, mcpserver.Options{Version: Version, Logger: logger, SyncBudget: jf.budget()})
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		logger.Error("MCP server stopped", "err", err)
		return 1
	}
	return 0
}

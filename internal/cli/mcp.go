package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/mcpserver"
)

// runMCP serves MCP over stdio. Only JSON-RPC reaches stdout: logs go to
// stderr, and runs never inherit the server's standard streams.
func runMCP(ctx context.Context, args []string, _, stderr io.Writer) int {
	var ef engineFlags
	var logLevel string
	fs := newFlagSet("mcp", "mcp [flags]", stderr, engineAliases)
	ef.register(fs)
	fs.StringVar(&logLevel, "log-level", "info", "log level on stderr: debug, info, warn, error")
	if code, ok := parseFlags(fs, args, engineAliases, stderr); !ok {
		return code
	}
	logger := newLogger(stderr, logLevel)
	ex, err := ef.executor()
	if err != nil {
		fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
		return 1
	}
	defer ex.Engine().Close() // stops the warm interpreters
	cfg := ex.Engine().Config()
	logger.Info("pyexec MCP server on stdio", "version", Version, "workspace", cfg.Workspace, "state_dir", cfg.StateDir)
	srv := mcpserver.New(ex, mcpserver.Options{Version: Version, Logger: logger})
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		logger.Error("MCP server stopped", "err", err)
		return 1
	}
	return 0
}

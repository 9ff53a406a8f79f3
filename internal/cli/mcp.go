package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/mcpserver"
	"github.com/pyexec/pyexec/internal/mcpstdio"
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
		tokenFile   string
		httpTimeout = secondsFlag{d: httpapi.DefaultTimeoutBuffer}
	)
	fs := newFlagSet("mcp", "mcp [flags]", stderr, mcpAliases)
	ef.register(fs)
	jf.register(fs)
	mf.register(fs)
	fs.StringVar(&logLevel, "log-level", "info", "log level on stderr: debug, info, warn, error")
	fs.StringVar(&remote, "executor", "", "URL of a `pyexec serve` execution server to delegate runs and jobs to (default: run in this process; engine and job flags other than --sync-budget then apply on the server)")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the execution server's bearer token (with --executor; default: PYEXEC_TOKEN, else, for a server on this machine, the token `pyexec serve` generated into STATE-DIR/server-token)")
	fs.Var(&httpTimeout, "http-timeout", "seconds added to a run's timeout for the HTTP call to the execution server; also how long it may stay silent (with --executor)")
	if refusedTokenFlag("mcp", args, stderr) {
		return 2
	}
	if code, ok := parseFlags(fs, args, mcpAliases, stderr); !ok {
		return code
	}
	logger := newLogger(stderr, logLevel)
	toolsets, err := mf.toolsetList()
	if err != nil {
		fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
		return 2
	}
	// Runs, jobs and scripts (saved and autosaved) all live on the
	// executing side: this process, or the execution server.
	var (
		ex    executor.Executor
		store executor.Scripts
	)
	if remote != "" {
		token, source, err := clientToken(remote, tokenFile, ef.stateDir)
		if err != nil {
			fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
			return 2
		}
		if token != "" {
			logger.Debug("execution server token", "from", source)
		}
		c, err := httpapi.NewClient(remote, httpapi.ClientOptions{Token: token, TimeoutBuffer: httpTimeout.d})
		if err != nil {
			fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
			return 2
		}
		ex, store = c, c
		defer func() { // send the last autosaves before exiting
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			c.FlushAutosaves(fctx)
		}()
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
		_ = takeEnvToken() // no server to send it to; keep it from runs
		jx, closeLocal, err := openLocal(ctx, &ef, &jf, logger)
		if err != nil {
			fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
			return 1
		}
		defer closeLocal()
		cfg := jx.Engine().Config()
		logger.Info("pyexec MCP server on stdio", "version", Version, "workspace", cfg.Workspace, "state_dir", cfg.StateDir)
		ex = jx
		s, err := mf.openStore(cfg.StateDir, logger)
		if err != nil {
			fmt.Fprintf(stderr, "pyexec mcp: %v\n", err)
			return 2
		}
		defer s.Close()
		store = executor.LocalScripts{Store: s, Jobs: jx}
	}
	logger.Debug("MCP tools", "toolsets", toolsets)
	srv := mcpserver.New(ex, mcpserver.Options{Version: Version, Logger: logger, SyncBudget: jf.budget(), Toolsets: toolsets, Scripts: store, MaxResultChars: jf.resultChars})
	hintIfTerminal(os.Stdin, stderr)
	// Not the SDK's stdio transport: one bad or oversized line must get an
	// error reply, not end the session (and every job with it).
	stdio := &mcpstdio.Transport{Reader: os.Stdin, Writer: os.Stdout, MaxFrameBytes: executor.BatchWireLimit(engine.DefaultCodeLimit), Logger: logger}
	if err := srv.Run(ctx, mcpserver.TaskTransport(stdio)); err != nil && ctx.Err() == nil {
		logger.Error("MCP server stopped", "err", err)
		return 1
	}
	return 0
}

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/pyexec/pyexec/internal/cluster"
	"github.com/pyexec/pyexec/internal/httpapi"
)

// serveAliases add the uv-exec-mcp seed's execution-server variables.
// EXECUTION_HOST and EXECUTION_PORT are read separately (they are two
// halves of --listen).
var serveAliases = withJobAliases(map[string][]string{
	"max-timeout": {"MAX_SCRIPT_TIMEOUT"},
})

// runServe is the execution server: REST under /v1, the seed's /execute and
// /health, /metrics, /openapi.json and MCP over Streamable HTTP at /mcp, all
// on one listener. Like the seed, the working directory (workspace) defaults
// to the directory it is started in.
func runServe(ctx context.Context, args []string, _, stderr io.Writer) int {
	var (
		ef             engineFlags
		jf             jobFlags
		mf             mcpFlags
		sf             storeFlags
		listen, token  string
		insecureNoAuth bool
		maxInFlight    int
		grace          float64
		sessionTimeout float64
		logLevel       string
	)
	fs := newFlagSet("serve", "serve [flags]", stderr, serveAliases)
	ef.register(fs)
	jf.register(fs)
	mf.register(fs)
	sf.register(fs)
	fs.StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on, HOST:PORT (also EXECUTION_HOST and EXECUTION_PORT)")
	fs.StringVar(&token, "token", "", "bearer token required on every route but /health (required to listen beyond loopback)")
	fs.BoolVar(&insecureNoAuth, "insecure-no-auth", false, "allow listening on a non-loopback address without a token (anyone who can connect can run code)")
	fs.IntVar(&maxInFlight, "max-inflight", 0, "most runs at once before requests get 429 busy (default 8 per core; -1: no limit)")
	fs.Float64Var(&grace, "shutdown-grace", httpapi.DefaultShutdownGrace.Seconds(), "seconds running calls may finish after SIGTERM before they are cancelled")
	fs.Float64Var(&sessionTimeout, "session-timeout", httpapi.DefaultSessionTimeout.Seconds(), "seconds after which an idle MCP session is closed")
	fs.StringVar(&logLevel, "log-level", "info", "log level on stderr: debug, info, warn, error")
	if code, ok := parseFlags(fs, args, serveAliases, stderr); !ok {
		return code
	}
	if !flagGiven(fs, "listen") {
		listen = seedListen(listen)
	}
	if !httpapi.IsLoopbackListen(listen) && token == "" && !insecureNoAuth {
		fmt.Fprintf(stderr, "pyexec serve: refusing to listen on %s (not loopback) without a token: anyone who can connect could run code.\n"+
			"Give --token (or PYEXEC_TOKEN), listen on 127.0.0.1, or pass --insecure-no-auth if you really mean it.\n", listen)
		return 2
	}
	logger := newLogger(stderr, logLevel)
	rep, err := sf.openReplica(ctx, &jf, logger)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec serve: %v\n", err)
		return 2
	}
	if rep != nil {
		defer rep.leave() // after the jobs are closed
	}
	jx, closeLocal, err := openLocal(ctx, &ef, &jf, logger)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec serve: %v\n", err)
		return 1
	}
	defer closeLocal() // runs after the HTTP server has drained
	cfg := jx.Engine().Config()
	toolsets, store, err := mf.open(cfg.StateDir, logger)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec serve: %v\n", err)
		return 2
	}
	defer store.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec serve: %v\n", err)
		return 1
	}
	defer ln.Close()
	var router *cluster.Router
	if rep != nil {
		if err := rep.join(ctx, &sf, ln, jx, logger); err != nil {
			fmt.Fprintf(stderr, "pyexec serve: %v\n", err)
			return 1
		}
		router = rep.router
	}
	srv, err := httpapi.NewServer(httpapi.Options{
		Executor: jx, Version: Version, Token: token, Logger: logger, SyncBudget: jf.budget(), MaxResultChars: jf.resultChars,
		Toolsets: toolsets, Scripts: store,
		CodeLimit: cfg.CodeLimit, MaxInFlight: maxInFlight,
		SessionTimeout: seconds(sessionTimeout), Workspace: cfg.Workspace,
		EnvBuilds: jx.Engine().Environments().Builds,
		Router:    router,
	})
	if err != nil {
		fmt.Fprintf(stderr, "pyexec serve: %v\n", err)
		return 1
	}
	url := "http://" + ln.Addr().String()
	// The seed's startup lines, which its README tells people to look for.
	fmt.Fprintf(stderr, "[START] pyexec %s execution server\n", Version)
	fmt.Fprintf(stderr, "[DIR] Working directory: %s\n", cfg.Workspace)
	auth := "bearer token required"
	if token == "" {
		auth = "no auth"
	}
	fmt.Fprintf(stderr, "[READY] Ready to execute Python scripts on %s (REST %s/v1, seed %s/execute, MCP %s/mcp; %s)\n", url, url, url, url, auth)
	if err := srv.Serve(ctx, ln, seconds(grace)); err != nil {
		logger.Error("server stopped", "err", err)
		return 1
	}
	logger.Info("server stopped")
	return 0
}

// seedListen builds HOST:PORT from the seed's EXECUTION_HOST and
// EXECUTION_PORT, over the defaults in def.
func seedListen(def string) string {
	host, port, err := net.SplitHostPort(def)
	if err != nil {
		return def
	}
	if h, ok := os.LookupEnv("EXECUTION_HOST"); ok && strings.TrimSpace(h) != "" {
		host = strings.TrimSpace(h)
	}
	if p, ok := os.LookupEnv("EXECUTION_PORT"); ok && strings.TrimSpace(p) != "" {
		port = strings.TrimSpace(p)
	}
	return net.JoinHostPort(host, port)
}

// flagGiven reports whether a flag was set on the command line or from its
// PYEXEC_* variable (applyEnv sets flags through fs.Set).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}

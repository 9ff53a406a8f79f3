package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
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
		listen         string
		tokenFile      string
		insecureNoAuth bool
		maxInFlight    int
		bodyBudget     sizeFlag
		grace          = secondsFlag{d: httpapi.DefaultShutdownGrace}
		sessionTimeout = secondsFlag{d: httpapi.DefaultSessionTimeout}
		logLevel       string
	)
	fs := newFlagSet("serve", "serve [flags]", stderr, serveAliases)
	ef.register(fs)
	jf.register(fs)
	mf.register(fs)
	sf.register(fs)
	fs.StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on, HOST:PORT (also EXECUTION_HOST and EXECUTION_PORT)")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the bearer token required on every route but /health (default: PYEXEC_TOKEN, else a token generated into STATE-DIR/server-token)")
	fs.BoolVar(&insecureNoAuth, "insecure-no-auth", false, "answer every route without a token, as the uv-exec-mcp seed did (anyone who can connect, runs included, can run code and read every job)")
	fs.IntVar(&maxInFlight, "max-inflight", 0, "most runs at once before requests get 429 busy (default 8 per core; -1: no limit)")
	bodyBudget = sizeFlag(httpapi.DefaultBodyBudget)
	fs.Var(&bodyBudget, "max-body-memory", "bytes of request bodies held at once (read, or kept by a running call); past it requests get 429 busy without being read (never below the largest batch body, 26MiB; -1: no bound)")
	fs.Var(&grace, "shutdown-grace", "seconds running calls may finish after SIGTERM before they are cancelled")
	fs.Var(&sessionTimeout, "session-timeout", "seconds after which an idle MCP session is closed")
	fs.StringVar(&logLevel, "log-level", "info", "log level on stderr: debug, info, warn, error")
	if refusedTokenFlag("serve", args, stderr) {
		return 2
	}
	if code, ok := parseFlags(fs, args, serveAliases, stderr); !ok {
		return code
	}
	if !flagGiven(fs, "listen") {
		listen = seedListen(listen)
	}
	logger := newLogger(stderr, logLevel)
	// Credentials first: a server that would start without a token (or
	// with one runs could read) must not start at all.
	token, tokenSource, err := serveAuth(tokenFile, insecureNoAuth, absDir(ef.stateDir), absDir(ef.workspace), logger)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec serve: %v\n", err)
		return 2
	}
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
	toolsets, err := mf.toolsetList()
	if err != nil {
		fmt.Fprintf(stderr, "pyexec serve: %v\n", err)
		return 2
	}
	store, err := mf.openStore(cfg.StateDir, logger)
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
	var sessionRouting *httpapi.SessionRouting
	if rep != nil {
		if err := rep.join(ctx, &sf, ln, jx, logger); err != nil {
			fmt.Fprintf(stderr, "pyexec serve: %v\n", err)
			return 1
		}
		router, sessionRouting = rep.router, rep.sessions
	}
	srv, err := httpapi.NewServer(httpapi.Options{
		Executor: jx, Version: Version, Token: token, NoAuth: insecureNoAuth, Logger: logger, SyncBudget: jf.budget(), MaxResultChars: jf.resultChars,
		Toolsets: toolsets, Scripts: store,
		CodeLimit: cfg.CodeLimit, MaxInFlight: maxInFlight, BodyBudget: int64(bodyBudget),
		SessionTimeout: sessionTimeout.d, Workspace: cfg.Workspace,
		EnvBuilds: jx.Engine().Environments().Builds,
		Envs:      jx.Engine().Environments().List,
		Router:    router, SessionRouting: sessionRouting,
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
	if insecureNoAuth {
		auth = "NO AUTH"
		fmt.Fprintf(stderr, "[AUTH] --insecure-no-auth: every route answers without a token; anyone who can connect to %s, runs included, can run code and read every job\n", url)
	} else {
		how := "clients need the same token (--token-file or PYEXEC_TOKEN)"
		if strings.HasPrefix(tokenSource, "generated") || tokenSource == "token file "+httpapi.TokenFile(cfg.StateDir) {
			how = fmt.Sprintf("`pyexec mcp --executor %s` with the same --state-dir finds it; other clients: --token-file %s", url, httpapi.TokenFile(cfg.StateDir))
		}
		fmt.Fprintf(stderr, "[AUTH] bearer token required (%s); %s\n", tokenSource, how)
	}
	fmt.Fprintf(stderr, "[READY] Ready to execute Python scripts on %s (REST %s/v1, seed %s/execute, MCP %s/mcp, audit page %s/ui; %s)\n", url, url, url, url, url, auth)
	if err := srv.Serve(ctx, ln, grace.d); err != nil {
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

// absDir is dir made absolute ("" is the current directory), as the engine
// resolves its workspace and state dir.
func absDir(dir string) string {
	if dir == "" {
		dir = "."
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

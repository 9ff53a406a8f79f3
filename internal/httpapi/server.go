// Package httpapi is pyexec's execution server and its Go client.
//
// The server (`pyexec serve`) puts one executor behind one listener: a JSON
// REST API under /v1, the uv-exec-mcp seed's POST /execute and GET /health,
// Prometheus metrics, an OpenAPI 3.1 document generated from the same Go
// types the handlers encode, and MCP over Streamable HTTP at /mcp. The client
// (Client) implements executor.Executor against such a server, which is how
// `pyexec mcp --executor URL` runs everything remotely without the MCP tools
// knowing.
package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/cluster"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/mcpserver"
	"github.com/pyexec/pyexec/internal/scripts"
	"github.com/pyexec/pyexec/internal/ui"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// Defaults of the server options.
const (
	DefaultSessionTimeout = 30 * time.Minute
)

// Options configure a Server.
type Options struct {
	// Executor runs the requests (required): usually executor.Local.
	Executor executor.Executor
	Version  string
	// Token is required as "Authorization: Bearer TOKEN" on every route but
	// /health. NewServer refuses an empty token unless NoAuth is set: a
	// server without credentials is a decision, never a default.
	Token string
	// NoAuth serves every route without a token (--insecure-no-auth).
	NoAuth bool
	Logger *slog.Logger
	// CodeLimit is the executor's inline code limit; request body limits are
	// derived from it (default engine.DefaultCodeLimit).
	CodeLimit int
	// MaxInFlight caps concurrent runs (a batch counts its entries); past it
	// requests get 429 busy. 0 means 8 per core; negative means no cap.
	MaxInFlight int
	// SessionTimeout closes idle MCP sessions (default 30 minutes).
	SessionTimeout time.Duration
	// Workspace is reported by /health (the seed's working directory).
	Workspace string
	// SyncBudget is the MCP tools' smart-async budget (executors with jobs;
	// default 20 s, negative: never hand off).
	SyncBudget time.Duration
	// MaxResultChars is the MCP tools' default result size (mcpserver.Options).
	MaxResultChars int
	// Toolsets are the MCP tool groups offered on /mcp (nil: the default);
	// Scripts is the script store behind the scripts tools and autosave.
	Toolsets []string
	Scripts  *scripts.Store
	// EnvBuilds, when set, reports how many uv environments were built
	// (engine.Environments().Builds), for the env cache metrics.
	EnvBuilds func() int64
	// ReadHeaderTimeout bounds how long a client may take to send its
	// request headers (slow-loris protection; default 10 s).
	ReadHeaderTimeout time.Duration
	// Envs, when set, lists the cached dependency environments for the
	// audit page (engine.Environments().List).
	Envs func(context.Context) ([]uvenv.EnvInfo, error)
	// ReadTimeout bounds reading a whole request, body included (default
	// 2 minutes). It does not limit how long a run may take.
	ReadTimeout time.Duration
	// BodyBudget bounds the bytes of request bodies held at once (see
	// bodyBudget); 0 means DefaultBodyBudget, negative no bound. It is never
	// below the largest single body (a batch), which always fits on an
	// idle server.
	BodyBudget int64
	// Router, when set, makes this server one replica of a set sharing a
	// PostgreSQL store: MCP session ids name this replica, a request for
	// another replica's session is forwarded there (404 when it is gone),
	// and every response says which replica answered (X-Pyexec-Node).
	Router *cluster.Router
	// SessionRouting, with Router, routes session calls to the replica
	// holding the session (session_route.go).
	SessionRouting *SessionRouting
}

// Server serves the REST API, the seed API and MCP over one listener.
type Server struct {
	opts    Options
	log     *slog.Logger
	adm     *admitted                // admission and metrics of sync runs
	ex      executor.Executor        // what every front end here calls (adm, or admittedJobs)
	jx      executor.JobExecutor     // ex when the executor runs background jobs, else nil
	sx      executor.SessionExecutor // the executor's sessions, else nil
	m       *metrics
	runs    *ui.RunLog // recent sync runs, for the audit page
	mcp     *mcp.Server
	handler http.Handler

	runBodyLimit   int64
	batchBodyLimit int64
	tokenSum       [32]byte

	bodies *bodyBudget // nil: no bound

	draining atomic.Bool
	active   tracker
}

// NewServer builds a server around opts.Executor.
func NewServer(opts Options) (*Server, error) {
	if opts.Executor == nil {
		return nil, fmt.Errorf("httpapi: an executor is required")
	}
	switch {
	case opts.Token == "" && !opts.NoAuth:
		return nil, fmt.Errorf("httpapi: a token is required (or NoAuth, to answer everyone)")
	case opts.Token != "" && opts.NoAuth:
		return nil, fmt.Errorf("httpapi: a token and NoAuth contradict each other")
	case opts.Token != "":
		if err := CheckToken(opts.Token); err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CodeLimit <= 0 {
		opts.CodeLimit = engine.DefaultCodeLimit
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = 8 * runtime.NumCPU()
	}
	if opts.ReadHeaderTimeout <= 0 {
		opts.ReadHeaderTimeout = defaultReadHeaderTimeout
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = defaultReadTimeout
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	s := &Server{opts: opts, log: opts.Logger, m: newMetrics(opts.Version, opts.EnvBuilds), runs: ui.NewRunLog(0)}
	// Sessions bypass the run admission limit (a cell is not a new
	// process; the sessions' own cap applies).
	s.sx, _ = opts.Executor.(executor.SessionExecutor)
	if s.sx != nil && opts.Router != nil && opts.SessionRouting != nil {
		s.sx = &routedSessions{SessionExecutor: s.sx, rt: *opts.SessionRouting, router: opts.Router, token: opts.Token, peers: map[string]*Client{}}
	}
	s.adm = &admitted{Executor: opts.Executor, sessionMethods: sessionMethods{s.sx}, m: s.m, runs: s.runs, limit: int64(max(opts.MaxInFlight, 0))}
	s.ex = s.adm
	if jx, ok := opts.Executor.(executor.JobExecutor); ok {
		w := &admittedJobs{JobExecutor: jx, sessionMethods: sessionMethods{s.sx}, a: s.adm}
		s.ex, s.jx = w, w
		s.m.watchJobs(jx)
	}
	// The largest requests whose fields are within their limits (JSON
	// escaping included); see engine.WireLimit.
	s.runBodyLimit = engine.WireLimit(opts.CodeLimit)
	s.batchBodyLimit = executor.BatchWireLimit(opts.CodeLimit)
	switch {
	case opts.BodyBudget == 0:
		s.bodies = &bodyBudget{limit: max(DefaultBodyBudget, s.batchBodyLimit)}
	case opts.BodyBudget > 0:
		s.bodies = &bodyBudget{limit: max(opts.BodyBudget, s.batchBodyLimit)}
	}
	s.tokenSum = sha256.Sum256([]byte(opts.Token))
	var store executor.Scripts // stays a nil interface without a store
	if opts.Scripts != nil {
		store = executor.LocalScripts{Store: opts.Scripts, Jobs: s.jx}
	}
	mopts := mcpserver.Options{Version: opts.Version, Logger: opts.Logger, SyncBudget: opts.SyncBudget, Toolsets: opts.Toolsets, Scripts: store, MaxResultChars: opts.MaxResultChars}
	if opts.Router != nil {
		mopts.SessionID = opts.Router.NewID
	}
	s.mcp = mcpserver.New(s.ex, mopts)
	s.handler = s.routes()
	return s, nil
}

// Handler is the server's whole HTTP surface.
func (s *Server) Handler() http.Handler { return s.handler }

// MCPServer is the MCP server behind /mcp.
func (s *Server) MCPServer() *mcp.Server { return s.mcp }

type routeOpts struct {
	public bool // no token needed (/health only)
	// browser routes (the audit page) also accept the login cookie, and
	// answer a request with neither token nor cookie with a login or a
	// refusal page (ui.go).
	browser bool
	// untracked requests do not hold off graceful shutdown (MCP's
	// standalone GET stream lives as long as its session).
	untracked func(*http.Request) bool
	// streamed bodies go straight to disk (file uploads, up to
	// --max-upload): they hold no memory, so the body budget does not
	// count them.
	streamed bool
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern, name string, o routeOpts, h http.Handler) {
		mux.Handle(pattern, s.wrap(name, o, h))
	}
	handle("/v1/run", "run", routeOpts{}, methods{http.MethodPost: s.handleRun})
	handle("/v1/batch", "batch", routeOpts{}, methods{http.MethodPost: s.handleBatch})
	handle("/v1/info", "info", routeOpts{}, methods{http.MethodGet: s.handleInfo})
	handle("/execute", "execute", routeOpts{}, methods{http.MethodPost: s.handleExecute})
	handle("/health", "health", routeOpts{public: true}, methods{http.MethodGet: s.handleHealth})
	handle("/metrics", "metrics", routeOpts{}, methods{http.MethodGet: s.handleMetrics})
	handle("/openapi.json", "openapi", routeOpts{}, methods{http.MethodGet: s.handleOpenAPI})
	handle("/mcp", "mcp", routeOpts{untracked: func(r *http.Request) bool { return r.Method == http.MethodGet }}, s.mcpHandler())
	if s.jx != nil {
		s.jobRoutes(handle)
	}
	s.envRoutes(handle)     // envs.go
	s.qualityRoutes(handle) // quality.go
	s.fileRoutes(handle)    // files.go
	s.uiRoutes(handle)
	if s.opts.Scripts != nil {
		s.scriptRoutes(handle) // scripts.go
	}
	if s.sx != nil {
		s.sessionRoutes(handle) // sessions.go
	}
	handle("/", "unknown", routeOpts{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newAPIError(http.StatusNotFound, CodeNotFound, "no route %s %s; see GET /openapi.json", r.Method, r.URL.Path))
	}))
	return mux
}

// methods dispatches by HTTP method, answering 405 (with Allow) otherwise.
type methods map[string]http.HandlerFunc

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, ok := m[r.Method]; ok {
		h(w, r)
		return
	}
	if r.Method == http.MethodHead {
		if h, ok := m[http.MethodGet]; ok {
			h(w, r)
			return
		}
	}
	allow := make([]string, 0, len(m))
	for k := range m {
		allow = append(allow, k)
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, newAPIError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
}

var crossOrigin = http.NewCrossOriginProtection()

// wrap applies what every route shares, outermost first: metrics, the
// draining check (503 during shutdown), DNS-rebinding protection (a loopback
// listener only answers loopback Host names), cross-origin protection for
// browsers, the bearer token, and shutdown tracking.
func (s *Server) wrap(name string, o routeOpts, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			s.m.httpReqs.WithLabelValues(name, fmt.Sprint(code)).Inc()
			s.m.httpLatency.WithLabelValues(name).Observe(time.Since(start).Seconds())
		}()
		w = sw
		if s.opts.Router != nil {
			w.Header().Set(NodeHeader, s.opts.Router.NodeID())
		}
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
			writeError(w, newAPIError(http.StatusServiceUnavailable, CodeUnavailable, "the server is shutting down"))
			return
		}
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
			if isLoopback(la.String()) && !isLoopback(r.Host) {
				writeError(w, newAPIError(http.StatusForbidden, CodeForbidden, "invalid Host header %q for a loopback server (DNS rebinding protection)", r.Host))
				return
			}
		}
		if err := crossOrigin.Check(r); err != nil {
			writeError(w, newAPIError(http.StatusForbidden, CodeForbidden, "%v", err))
			return
		}
		if !o.public && !s.authorized(r) && !(o.browser && s.browserAuthorized(r)) {
			if o.browser && s.browserGate(w, r) {
				return
			}
			writeError(w, newAPIError(http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token: send \"Authorization: Bearer TOKEN\" with the server's token (`pyexec serve` prints where its token file is when it starts; `pyexec mcp --executor` with the same state dir finds it)"))
			return
		}
		releaseBody := func() {}
		var err error
		if !o.streamed {
			r, releaseBody, err = s.admitBody(w, r)
		}
		if err != nil {
			w.Header().Set("Connection", "close") // the unread body goes with the connection
			writeError(w, err)
			return
		}
		defer releaseBody()
		if o.untracked == nil || !o.untracked(r) {
			s.active.add()
			defer s.active.done()
		}
		h.ServeHTTP(w, r.WithContext(withRoute(r.Context(), name)))
	})
}

// authorized compares the bearer token in constant time (over fixed-size
// digests, so not even the token's length leaks).
func (s *Server) authorized(r *http.Request) bool {
	if s.opts.NoAuth {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackListen reports whether a listen address only accepts loopback
// connections (an empty host means every interface, so it does not).
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	return isLoopback(host)
}

// statusWriter records the status for metrics; Unwrap keeps Flush and
// deadlines reachable through http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// tracker counts requests in progress so shutdown can wait for them.
type tracker struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

func (t *tracker) add() {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
}

func (t *tracker) done() {
	t.mu.Lock()
	t.n--
	if t.n == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
	t.mu.Unlock()
}

// idle is closed once no tracked request is in progress.
func (t *tracker) idle() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if t.zero == nil {
		t.zero = make(chan struct{})
	}
	return t.zero
}

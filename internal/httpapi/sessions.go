package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/session"
)

// Live Python sessions over REST, served when the executor keeps sessions
// (Client implements executor.SessionExecutor with these routes, so
// `pyexec mcp --executor URL` sessions live here):
//
//	POST   /v1/sessions                   create (201 + its state)
//	GET    /v1/sessions                   list
//	GET    /v1/sessions/{name}            one session's state
//	DELETE /v1/sessions/{name}            close it (its final state)
//	GET    /v1/sessions/{name}/history    its cells
//	POST   /v1/sessions/{name}/run        run a cell (creates the session when the name is free)
//	POST   /v1/sessions/{name}/interrupt  KeyboardInterrupt into the running cell
//	POST   /v1/sessions/{name}/reset      a fresh interpreter with the same settings
//	POST   /v1/sessions/{name}/export     write its history as a Jupyter notebook in the workspace

// SessionRunRequest is the body of POST /v1/sessions/{name}/run.
type SessionRunRequest struct {
	Code         string  `json:"code" jsonschema:"The cell's Python source."`
	Timeout      float64 `json:"timeout,omitempty" jsonschema:"The cell's time limit in seconds; past it the cell gets KeyboardInterrupt, and the session is killed if it does not stop. A cell waited for to the end (no sync_budget, not async): default 30, at most the server's maximum. A job-backed cell (sync_budget or async): the job's limit, this value when shorter than the server's --job-timeout (default 3600 s), else --job-timeout."`
	SyncBudget   float64 `json:"sync_budget,omitempty" jsonschema:"Seconds to wait for the cell before it continues as a background job (the response then has job_id, status busy and the output so far; GET /v1/jobs/{id} follows it). Default 0: wait for the end. Needs the server's job store."`
	Async        bool    `json:"async,omitempty" jsonschema:"Start the cell as a background job and return its job_id at once. Needs the server's job store."`
	OutputBudget int     `json:"output_budget,omitempty" jsonschema:"Servers with background jobs: characters of output the caller will show (default 20000). A job-backed cell that finishes with more, or with images that cannot all go inline (over 8, or over 1 MB), keeps its job (output_job_id) so its full output and images stay readable."`
	session.Settings
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []session.Info `json:"sessions" jsonschema:"Every session, oldest first."`
	Count    int            `json:"count" jsonschema:"Number of sessions."`
}

func (s *Server) sessionRoutes(handle0 func(pattern, name string, o routeOpts, h http.Handler)) {
	// A call another replica forwarded is served here, never sent on.
	handle := func(pattern, name string, o routeOpts, h methods) {
		for m, f := range h {
			h[m] = func(w http.ResponseWriter, r *http.Request) { f(w, forwarded(r)) }
		}
		handle0(pattern, name, o, h)
	}
	handle("/v1/sessions", "sessions", routeOpts{}, methods{http.MethodGet: s.handleListSessions, http.MethodPost: s.handleCreateSession})
	handle("/v1/sessions/{name}", "session", routeOpts{}, methods{http.MethodGet: s.handleGetSession, http.MethodDelete: s.handleCloseSession})
	handle("/v1/sessions/{name}/history", "session_history", routeOpts{}, methods{http.MethodGet: s.handleSessionHistory})
	handle("/v1/sessions/{name}/run", "session_run", routeOpts{}, methods{http.MethodPost: s.handleSessionRun})
	handle("/v1/sessions/{name}/interrupt", "session_interrupt", routeOpts{}, methods{http.MethodPost: s.handleSessionInterrupt})
	handle("/v1/sessions/{name}/reset", "session_reset", routeOpts{}, methods{http.MethodPost: s.handleSessionReset})
	handle("/v1/sessions/{name}/export", "session_export", routeOpts{}, methods{http.MethodPost: s.handleSessionExport})
}

// SessionExportRequest is the body of POST /v1/sessions/{name}/export.
type SessionExportRequest struct {
	Path string `json:"path" jsonschema:"Where to write the notebook: a .ipynb path in the workspace, relative to the session's cwd."`
}

func (s *Server) handleSessionExport(w http.ResponseWriter, r *http.Request) {
	var req SessionExportRequest
	if err := decode(w, r, s.runBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.sx.SessionExport(r.Context(), r.PathValue("name"), req.Path)
	s.reply(w, res, err)
}

func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req session.CreateRequest
	if err := decode(w, r, s.runBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	info, err := s.sx.SessionCreate(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+url.PathEscape(info.Name))
	writeJSON(w, http.StatusCreated, info)
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.sx.SessionList(r.Context())
	s.reply(w, SessionList{Sessions: list, Count: len(list)}, err)
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	info, err := s.sx.SessionGet(r.Context(), r.PathValue("name"))
	s.reply(w, info, err)
}

func (s *Server) handleCloseSession(w http.ResponseWriter, r *http.Request) {
	info, err := s.sx.SessionClose(r.Context(), r.PathValue("name"))
	s.reply(w, info, err)
}

func (s *Server) handleSessionHistory(w http.ResponseWriter, r *http.Request) {
	h, err := s.sx.SessionHistory(r.Context(), r.PathValue("name"))
	s.reply(w, h, err)
}

func (s *Server) handleSessionRun(w http.ResponseWriter, r *http.Request) {
	var req SessionRunRequest
	if err := decode(w, r, s.runBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	// The client going away cancels the call: the cell gets KeyboardInterrupt.
	res, err := s.sx.SessionRun(r.Context(), session.RunRequest{Session: r.PathValue("name"), Code: req.Code, Timeout: req.Timeout, SyncBudget: req.SyncBudget, Async: req.Async, OutputBudget: req.OutputBudget, Settings: req.Settings}, nil)
	s.reply(w, res, err)
}

func (s *Server) handleSessionInterrupt(w http.ResponseWriter, r *http.Request) {
	info, err := s.sx.SessionInterrupt(r.Context(), r.PathValue("name"))
	s.reply(w, info, err)
}

func (s *Server) handleSessionReset(w http.ResponseWriter, r *http.Request) {
	info, err := s.sx.SessionReset(r.Context(), r.PathValue("name"))
	s.reply(w, info, err)
}

// sessionErrorStatus maps a refused session call to its HTTP form; kind
// travels along so the client rebuilds the same *session.Error.
func sessionErrorStatus(err error) *apiError {
	var se *session.Error
	if !errors.As(err, &se) {
		return nil
	}
	status, code := http.StatusConflict, CodeConflict
	switch se.Kind {
	case session.KindNotFound:
		status, code = http.StatusNotFound, CodeNotFound
	case session.KindLimit:
		status, code = http.StatusTooManyRequests, CodeBusy
	}
	return &apiError{Status: status, Detail: ErrorDetail{Code: code, Message: se.Message, Field: "session", SessionError: se.Kind, LostReason: se.Reason}}
}

// sessionMethods are the admission wrappers' session methods: the
// wrapped executor's, so MCP over /mcp offers sessions; without sessions
// there, each says so.
type sessionMethods struct{ sx executor.SessionExecutor }

var errNoSessions = errors.New("session: this server's executor keeps no sessions")

func (m sessionMethods) get() (executor.SessionExecutor, error) {
	if m.sx == nil {
		return nil, errNoSessions
	}
	return m.sx, nil
}

func (m sessionMethods) SessionCreate(ctx context.Context, req session.CreateRequest) (session.Info, error) {
	sx, err := m.get()
	if err != nil {
		return session.Info{}, err
	}
	return sx.SessionCreate(ctx, req)
}
func (m sessionMethods) SessionRun(ctx context.Context, req session.RunRequest, p executor.ProgressFunc) (session.CellResult, error) {
	sx, err := m.get()
	if err != nil {
		return session.CellResult{}, err
	}
	return sx.SessionRun(ctx, req, p)
}
func (m sessionMethods) SessionList(ctx context.Context) ([]session.Info, error) {
	sx, err := m.get()
	if err != nil {
		return nil, err
	}
	return sx.SessionList(ctx)
}
func (m sessionMethods) SessionGet(ctx context.Context, name string) (session.Info, error) {
	sx, err := m.get()
	if err != nil {
		return session.Info{}, err
	}
	return sx.SessionGet(ctx, name)
}
func (m sessionMethods) SessionHistory(ctx context.Context, name string) (session.History, error) {
	sx, err := m.get()
	if err != nil {
		return session.History{}, err
	}
	return sx.SessionHistory(ctx, name)
}
func (m sessionMethods) SessionClose(ctx context.Context, name string) (session.Info, error) {
	sx, err := m.get()
	if err != nil {
		return session.Info{}, err
	}
	return sx.SessionClose(ctx, name)
}
func (m sessionMethods) SessionReset(ctx context.Context, name string) (session.Info, error) {
	sx, err := m.get()
	if err != nil {
		return session.Info{}, err
	}
	return sx.SessionReset(ctx, name)
}
func (m sessionMethods) SessionExport(ctx context.Context, name, path string) (executor.SessionExportResult, error) {
	sx, err := m.get()
	if err != nil {
		return executor.SessionExportResult{}, err
	}
	return sx.SessionExport(ctx, name, path)
}
func (m sessionMethods) SessionInterrupt(ctx context.Context, name string) (session.Info, error) {
	sx, err := m.get()
	if err != nil {
		return session.Info{}, err
	}
	return sx.SessionInterrupt(ctx, name)
}

package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/pyexec/pyexec/internal/executor"
)

// Named environments over REST (the env_list, env_create and env_delete
// tools of a remote MCP front end call these):
//
//	GET    /v1/envs          the cache: every environment, named ones pinned
//	POST   /v1/envs          {name, dependencies, python_version} -> the env (NDJSON progress while it builds)
//	DELETE /v1/envs/{name}   remove a name and, unless shared or in use, its files

// envRoutes registers the environment routes.
func (s *Server) envRoutes(handle func(pattern, name string, o routeOpts, h http.Handler)) {
	handle("/v1/envs", "envs", routeOpts{}, methods{http.MethodGet: s.handleListEnvs, http.MethodPost: s.handleCreateEnv})
	handle("/v1/envs/{name}", "env", routeOpts{}, methods{http.MethodDelete: s.handleDeleteEnv})
}

var errNoEnvExecutor = newAPIError(http.StatusNotImplemented, CodeInternal, "this server's executor does not manage environments")

func (s *Server) envExecutor(w http.ResponseWriter) (executor.EnvExecutor, bool) {
	ex, ok := s.opts.Executor.(executor.EnvExecutor)
	if !ok {
		writeError(w, errNoEnvExecutor)
	}
	return ex, ok
}

func (s *Server) handleListEnvs(w http.ResponseWriter, r *http.Request) {
	ex, ok := s.envExecutor(w)
	if !ok {
		return
	}
	l, err := ex.Envs(r.Context())
	s.reply(w, l, err)
}

func (s *Server) handleCreateEnv(w http.ResponseWriter, r *http.Request) {
	ex, ok := s.envExecutor(w)
	if !ok {
		return
	}
	var req executor.EnvCreateRequest
	if err := decode(w, r, smallBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	if wantsNDJSON(r) {
		st := newStream[executor.EnvInfo](w)
		e, err := ex.CreateEnv(r.Context(), req, st.progress)
		st.finish(e, err)
		return
	}
	e, err := ex.CreateEnv(r.Context(), req, nil)
	s.reply(w, e, err)
}

func (s *Server) handleDeleteEnv(w http.ResponseWriter, r *http.Request) {
	ex, ok := s.envExecutor(w)
	if !ok {
		return
	}
	res, err := ex.DeleteEnv(r.Context(), r.PathValue("name"))
	s.reply(w, res, err)
}

// The client side: Client is an executor.EnvExecutor.

var _ executor.EnvExecutor = (*Client)(nil)

// envBuildTimeout bounds a remote env_create (a big build takes minutes;
// the stream's heartbeats keep the connection alive meanwhile).
const envBuildTimeout = 30 * time.Minute

// Envs implements executor.EnvExecutor.
func (c *Client) Envs(ctx context.Context) (executor.EnvList, error) {
	var l executor.EnvList
	err := c.jsonCall(ctx, http.MethodGet, "/v1/envs", nil, &l, 0)
	return l, err
}

// CreateEnv implements executor.EnvExecutor.
func (c *Client) CreateEnv(ctx context.Context, req executor.EnvCreateRequest, progress executor.ProgressFunc) (executor.EnvInfo, error) {
	return call[executor.EnvInfo](ctx, c, "/v1/envs", req, envBuildTimeout, progress)
}

// DeleteEnv implements executor.EnvExecutor.
func (c *Client) DeleteEnv(ctx context.Context, name string) (executor.EnvDeleteResult, error) {
	var res executor.EnvDeleteResult
	err := c.jsonCall(ctx, http.MethodDelete, "/v1/envs/"+url.PathEscape(name), nil, &res, 0)
	return res, err
}

// The admission wrappers keep the optional seams of the executor they
// wrap, so /mcp's env tools reach it.

// Envs implements executor.EnvExecutor.
func (a *admitted) Envs(ctx context.Context) (executor.EnvList, error) {
	ex, ok := a.Executor.(executor.EnvExecutor)
	if !ok {
		return executor.EnvList{}, errors.New(errNoEnvExecutor.Detail.Message)
	}
	return ex.Envs(ctx)
}

// CreateEnv implements executor.EnvExecutor.
func (a *admitted) CreateEnv(ctx context.Context, req executor.EnvCreateRequest, progress executor.ProgressFunc) (executor.EnvInfo, error) {
	ex, ok := a.Executor.(executor.EnvExecutor)
	if !ok {
		return executor.EnvInfo{}, errors.New(errNoEnvExecutor.Detail.Message)
	}
	return ex.CreateEnv(ctx, req, progress)
}

// DeleteEnv implements executor.EnvExecutor.
func (a *admitted) DeleteEnv(ctx context.Context, name string) (executor.EnvDeleteResult, error) {
	ex, ok := a.Executor.(executor.EnvExecutor)
	if !ok {
		return executor.EnvDeleteResult{}, errors.New(errNoEnvExecutor.Detail.Message)
	}
	return ex.DeleteEnv(ctx, name)
}

// Envs implements executor.EnvExecutor.
func (x *admittedJobs) Envs(ctx context.Context) (executor.EnvList, error) { return x.a.Envs(ctx) }

// CreateEnv implements executor.EnvExecutor.
func (x *admittedJobs) CreateEnv(ctx context.Context, req executor.EnvCreateRequest, progress executor.ProgressFunc) (executor.EnvInfo, error) {
	return x.a.CreateEnv(ctx, req, progress)
}

// DeleteEnv implements executor.EnvExecutor.
func (x *admittedJobs) DeleteEnv(ctx context.Context, name string) (executor.EnvDeleteResult, error) {
	return x.a.DeleteEnv(ctx, name)
}

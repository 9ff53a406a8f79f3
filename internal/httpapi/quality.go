package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/quality"
)

// Code quality and profiling over REST (format_code, lint_code and
// run_script_profile of a remote MCP front end call these; each is one
// confined run on this server):
//
//	POST /v1/format    quality.FormatRequest  -> quality.FormatResult
//	POST /v1/lint      quality.LintRequest    -> quality.LintResult
//	POST /v1/profile   executor.ProfileRequest -> executor.ProfileResult (NDJSON progress)

func (s *Server) qualityRoutes(handle func(pattern, name string, o routeOpts, h http.Handler)) {
	handle("/v1/format", "format", routeOpts{}, methods{http.MethodPost: s.handleFormat})
	handle("/v1/lint", "lint", routeOpts{}, methods{http.MethodPost: s.handleLint})
	handle("/v1/profile", "profile", routeOpts{}, methods{http.MethodPost: s.handleProfile})
}

var (
	errNoQuality  = errors.New("this server's executor cannot format or lint")
	errNoProfiler = errors.New("this server's executor cannot profile")
)

func (s *Server) handleFormat(w http.ResponseWriter, r *http.Request) {
	var req quality.FormatRequest
	if err := decode(w, r, s.runBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.adm.Format(r.Context(), req)
	s.reply(w, res, err)
}

func (s *Server) handleLint(w http.ResponseWriter, r *http.Request) {
	var req quality.LintRequest
	if err := decode(w, r, s.runBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.adm.Lint(r.Context(), req)
	s.reply(w, res, err)
}

func (s *Server) handleProfile(w http.ResponseWriter, r *http.Request) {
	var req executor.ProfileRequest
	if err := decode(w, r, s.runBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	if wantsNDJSON(r) {
		st := newStream[executor.ProfileResult](w)
		res, err := s.adm.Profile(r.Context(), req, st.progress)
		st.finish(res, err)
		return
	}
	res, err := s.adm.Profile(r.Context(), req, nil)
	s.reply(w, res, err)
}

// Client side.

var (
	_ executor.QualityExecutor = (*Client)(nil)
	_ executor.Profiler        = (*Client)(nil)
)

// Format implements executor.QualityExecutor.
func (c *Client) Format(ctx context.Context, req quality.FormatRequest) (quality.FormatResult, error) {
	var res quality.FormatResult
	err := c.jsonCall(ctx, http.MethodPost, "/v1/format", req, &res, qualityTimeout)
	return res, err
}

// Lint implements executor.QualityExecutor.
func (c *Client) Lint(ctx context.Context, req quality.LintRequest) (quality.LintResult, error) {
	var res quality.LintResult
	err := c.jsonCall(ctx, http.MethodPost, "/v1/lint", req, &res, qualityTimeout)
	return res, err
}

// qualityTimeout covers installing ruff on the server's first use.
const qualityTimeout = 5 * time.Minute

// Profile implements executor.Profiler.
func (c *Client) Profile(ctx context.Context, req executor.ProfileRequest, progress executor.ProgressFunc) (executor.ProfileResult, error) {
	d, err := c.deadline(ctx, []engine.Request{req.Request})
	if err != nil {
		return executor.ProfileResult{}, err
	}
	return call[executor.ProfileResult](ctx, c, "/v1/profile", req, d, progress)
}

// The admission wrappers: a format, lint or profile is a run and holds one
// slot; they keep the seams of the executor they wrap.

// Format implements executor.QualityExecutor.
func (a *admitted) Format(ctx context.Context, req quality.FormatRequest) (quality.FormatResult, error) {
	q, ok := a.Executor.(executor.QualityExecutor)
	if !ok {
		return quality.FormatResult{}, errNoQuality
	}
	if err := a.acquire(1); err != nil {
		return quality.FormatResult{}, err
	}
	defer a.release(1)
	return q.Format(ctx, req)
}

// Lint implements executor.QualityExecutor.
func (a *admitted) Lint(ctx context.Context, req quality.LintRequest) (quality.LintResult, error) {
	q, ok := a.Executor.(executor.QualityExecutor)
	if !ok {
		return quality.LintResult{}, errNoQuality
	}
	if err := a.acquire(1); err != nil {
		return quality.LintResult{}, err
	}
	defer a.release(1)
	return q.Lint(ctx, req)
}

// Profile implements executor.Profiler.
func (a *admitted) Profile(ctx context.Context, req executor.ProfileRequest, progress executor.ProgressFunc) (executor.ProfileResult, error) {
	p, ok := a.Executor.(executor.Profiler)
	if !ok {
		return executor.ProfileResult{}, errNoProfiler
	}
	if err := a.acquire(1); err != nil {
		return executor.ProfileResult{}, err
	}
	defer a.release(1)
	return p.Profile(ctx, req, progress)
}

// Format implements executor.QualityExecutor.
func (x *admittedJobs) Format(ctx context.Context, req quality.FormatRequest) (quality.FormatResult, error) {
	return x.a.Format(ctx, req)
}

// Lint implements executor.QualityExecutor.
func (x *admittedJobs) Lint(ctx context.Context, req quality.LintRequest) (quality.LintResult, error) {
	return x.a.Lint(ctx, req)
}

// Profile implements executor.Profiler.
func (x *admittedJobs) Profile(ctx context.Context, req executor.ProfileRequest, progress executor.ProgressFunc) (executor.ProfileResult, error) {
	return x.a.Profile(ctx, req, progress)
}

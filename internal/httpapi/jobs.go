package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
)

// Background jobs over REST, served when the executor runs jobs
// (executor.JobExecutor):
//
//	POST /v1/run with sync_budget      smart-async: the result, or 202 + the job it became
//	POST /v1/jobs                      start a job (202 + the job)
//	GET  /v1/jobs                      list (status, label, limit, include_request)
//	GET  /v1/jobs/{id}                 one job
//	GET  /v1/jobs/{id}/output          output after byte offsets (wait long-polls);
//	                                   Accept: text/event-stream streams output and
//	                                   status as SSE until the job ends
//	GET  /v1/jobs/{id}/events          SSE of the job's coalesced change events
//	POST /v1/jobs/{id}/cancel          cancel (kills the tree)
//	POST /v1/jobs/prune                remove finished jobs

// MaxOutputWait caps the wait of GET /v1/jobs/{id}/output, as get_job does.
const MaxOutputWait = 120 * time.Second

// sseKeepalive is how often an idle SSE stream sends a comment, so proxies
// and clients see the connection is alive.
const sseKeepalive = 15 * time.Second

// RunRequest is the body of POST /v1/run: a run request, plus the
// smart-async budget on servers with jobs.
type RunRequest struct {
	engine.Request
	SyncBudget float64 `json:"sync_budget,omitempty" jsonschema:"Servers with background jobs: seconds to wait for the result before the run is handed off to a background job (then the answer is 202 with the job and the output so far). 0 (default): wait for the result."`
	JobLabel   string  `json:"job_label,omitempty" jsonschema:"Label of the background job if the run is handed off."`
	KeepJob    bool    `json:"keep_job,omitempty" jsonschema:"Servers with background jobs: run as a job that is kept after the run (get_job and list_jobs see it), without a handoff unless sync_budget is set; a streamed answer names the job in a {\"job\": ...} line first. MCP tasks of a remote front end use it."`
	// OutputBudget: see executor.SyncOptions.
	OutputBudget int `json:"output_budget,omitempty" jsonschema:"Servers with background jobs: characters of output the caller will show (default 20000). A finished run with more is kept as a job (output_job_id) so its full output stays readable."`
}

// RunHandoff is the answer when a run outlived its sync_budget: it goes on
// as a background job.
type RunHandoff struct {
	Job    jobs.Job   `json:"job" jsonschema:"The background job the run continues as."`
	Output jobs.Chunk `json:"output" jsonschema:"Output so far; continue from its next offsets with GET /v1/jobs/{id}/output."`
}

// StartJobRequest is the body of POST /v1/jobs.
type StartJobRequest struct {
	engine.Request
	JobLabel string `json:"job_label,omitempty" jsonschema:"Label of the job (GET /v1/jobs can filter by it)."`
}

// PruneRequest is the body of POST /v1/jobs/prune.
type PruneRequest struct {
	KeepCompleted bool    `json:"keep_completed,omitempty" jsonschema:"Keep completed jobs (default false: remove them)."`
	KeepFailed    bool    `json:"keep_failed,omitempty" jsonschema:"Keep failed and cancelled jobs (default false: remove them)."`
	MaxAgeHours   float64 `json:"max_age_hours,omitempty" jsonschema:"Only remove jobs that finished more than this many hours ago (default 0: any age). Pending and running jobs are never removed."`
}

// JobEvent is one event of GET /v1/jobs/{id}/events: the job changed.
// Events are coalesced (a few per second at most).
type JobEvent struct {
	JobID    string         `json:"job_id" jsonschema:"The job that changed."`
	Status   jobs.Status    `json:"status" jsonschema:"Its status now."`
	Output   bool           `json:"output,omitempty" jsonschema:"Its output grew since the last event."`
	Progress *jobs.Progress `json:"progress,omitempty" jsonschema:"The script's newest progress, when it changed."`
	Done     bool           `json:"done,omitempty" jsonschema:"The job reached its final status (the stream ends)."`
}

func (s *Server) jobRoutes(handle func(pattern, name string, o routeOpts, h http.Handler)) {
	sse := routeOpts{untracked: func(r *http.Request) bool { return wantsSSE(r) }}
	handle("/v1/jobs", "jobs", routeOpts{}, methods{http.MethodGet: s.handleListJobs, http.MethodPost: s.handleStartJob})
	handle("/v1/jobs/prune", "jobs_prune", routeOpts{}, methods{http.MethodPost: s.handlePruneJobs})
	handle("/v1/jobs/{id}", "job", routeOpts{}, methods{http.MethodGet: s.handleGetJob})
	handle("/v1/jobs/{id}/output", "job_output", sse, methods{http.MethodGet: s.handleJobOutput})
	handle("/v1/jobs/{id}/events", "job_events", routeOpts{untracked: func(*http.Request) bool { return true }}, methods{http.MethodGet: s.handleJobEvents})
	handle("/v1/jobs/{id}/cancel", "job_cancel", routeOpts{}, methods{http.MethodPost: s.handleCancelJob})
	handle("/v1/jobs/{id}/artifacts/{name}", "job_artifact", routeOpts{}, methods{http.MethodGet: s.handleJobArtifact})
}

// handleJobArtifact is GET /v1/jobs/{id}/artifacts/{name}: the bytes of
// something the job's run displayed (jobs.Artifact), as stored.
func (s *Server) handleJobArtifact(w http.ResponseWriter, r *http.Request) {
	ax, ok := s.jx.(executor.JobArtifacts)
	if !ok {
		writeError(w, newAPIError(http.StatusNotImplemented, CodeInternal, "this server keeps no job artifacts"))
		return
	}
	data, mime, err := ax.Artifact(r.Context(), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", mime)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

func wantsSSE(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if mediaIn(v, "text/event-stream") {
			return true
		}
	}
	return false
}

func (s *Server) handleStartJob(w http.ResponseWriter, r *http.Request) {
	var req StartJobRequest
	if err := decode(w, r, s.runBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	j, err := s.jx.Start(r.Context(), req.Request, req.JobLabel)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/jobs/"+url.PathEscape(j.ID))
	writeJSON(w, http.StatusAccepted, j)
}

func (s *Server) handleListJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := jobs.Filter{Status: jobs.Status(q.Get("status")), Label: q.Get("label")}
	if f.Status != "" && !f.Status.Valid() {
		writeError(w, &engine.RequestError{Field: "status", Message: fmt.Sprintf("%q is not a status; use pending, running, completed, failed or cancelled", f.Status)})
		return
	}
	var err error
	if f.Limit, err = intParam(q, "limit"); err != nil {
		writeError(w, err)
		return
	}
	if f.IncludeRequest, err = boolParam(q, "include_request"); err != nil {
		writeError(w, err)
		return
	}
	l, err := s.jx.Jobs(r.Context(), f)
	s.reply(w, l, err)
}

func (s *Server) handleGetJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.jx.Job(r.Context(), r.PathValue("id"))
	s.reply(w, j, err)
}

func (s *Server) handleCancelJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.jx.Cancel(r.Context(), r.PathValue("id"))
	s.reply(w, j, err)
}

func (s *Server) handlePruneJobs(w http.ResponseWriter, r *http.Request) {
	var req PruneRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, 64<<10, &req, true); err != nil {
			writeError(w, err)
			return
		}
	}
	res, err := s.jx.Prune(r.Context(), jobs.PruneOptions{KeepCompleted: req.KeepCompleted, KeepFailed: req.KeepFailed, MaxAgeHours: req.MaxAgeHours})
	s.reply(w, res, err)
}

// cursorParams reads stdout_offset, stderr_offset, max_bytes and wait.
func cursorParams(q url.Values) (jobs.Cursor, error) {
	var c jobs.Cursor
	so, err := int64Param(q, "stdout_offset")
	if err != nil {
		return c, err
	}
	se, err := int64Param(q, "stderr_offset")
	if err != nil {
		return c, err
	}
	c.StdoutOffset, c.StderrOffset = so, se
	if c.MaxBytes, err = intParam(q, "max_bytes"); err != nil {
		return c, err
	}
	wait, err := floatParam(q, "wait")
	if err != nil {
		return c, err
	}
	c.Wait = engine.SecondsUpTo(wait, MaxOutputWait)
	return c, nil
}

func (s *Server) handleJobOutput(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	cur, err := cursorParams(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	if wantsSSE(r) {
		s.streamJobOutput(w, r, id, cur)
		return
	}
	ch, err := s.jx.Output(r.Context(), id, cur)
	s.reply(w, ch, err)
}

// sseWriter writes server-sent events, each write bounded in time.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: http.NewResponseController(w)}
	_ = sw.rc.Flush()
	return sw
}

func (sw *sseWriter) event(name, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_ = sw.rc.SetWriteDeadline(time.Now().Add(writeGrace))
	if id != "" {
		if _, err := fmt.Fprintf(sw.w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(sw.w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		return err
	}
	return sw.rc.Flush()
}

func (sw *sseWriter) comment(text string) error {
	_ = sw.rc.SetWriteDeadline(time.Now().Add(writeGrace))
	if _, err := fmt.Fprintf(sw.w, ": %s\n\n", text); err != nil {
		return err
	}
	return sw.rc.Flush()
}

// streamJobOutput is GET /v1/jobs/{id}/output as SSE: "status" (the job,
// at once and whenever its status, phase or script progress changes),
// "output" (a chunk of new output; its id is "STDOUT_OFFSET:STDERR_OFFSET",
// so a client can resume with Last-Event-ID or the query offsets) and a
// final "end" (the finished job) once all output has been sent.
func (s *Server) streamJobOutput(w http.ResponseWriter, r *http.Request, id string, cur jobs.Cursor) {
	ctx := r.Context()
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if _, err := fmt.Sscanf(last, "%d:%d", &cur.StdoutOffset, &cur.StderrOffset); err != nil {
			writeError(w, &engine.RequestError{Field: "Last-Event-ID", Message: fmt.Sprintf("%q is not STDOUT_OFFSET:STDERR_OFFSET", last)})
			return
		}
	}
	j, err := s.jx.Job(ctx, id)
	if err != nil {
		writeError(w, err)
		return
	}
	j.Request = nil
	sw := startSSE(w)
	if sw.event("status", "", j) != nil {
		return
	}
	last := j
	idle := time.Now()
	for ctx.Err() == nil {
		// Long-poll briefly, so status and progress changes (which do not
		// wake an output wait) are seen within a second.
		c := cur
		c.Wait = time.Second
		ch, err := s.jx.Output(ctx, id, c)
		if err != nil {
			if ctx.Err() == nil {
				d := toAPIError(err).Detail
				_ = sw.event("error", "", ErrorBody{Error: d})
			}
			return
		}
		if ch.StdoutOffset != cur.StdoutOffset || ch.StderrOffset != cur.StderrOffset {
			if sw.event("output", fmt.Sprintf("%d:%d", ch.StdoutOffset, ch.StderrOffset), ch) != nil {
				return
			}
			cur.StdoutOffset, cur.StderrOffset = ch.StdoutOffset, ch.StderrOffset
			idle = time.Now()
		}
		j, err := s.jx.Job(ctx, id)
		if err != nil {
			continue // the next Output reports it
		}
		j.Request = nil
		if ch.Done && j.Status.Terminal() {
			_ = sw.event("end", "", j)
			return
		}
		if changed(last, j) {
			if sw.event("status", "", j) != nil {
				return
			}
			last, idle = j, time.Now()
		}
		if time.Since(idle) >= sseKeepalive {
			if sw.comment("keepalive") != nil {
				return
			}
			idle = time.Now()
		}
	}
}

func changed(a, b jobs.Job) bool {
	if a.Status != b.Status || a.Phase != b.Phase || (a.Progress == nil) != (b.Progress == nil) {
		return true
	}
	return a.Progress != nil && !a.Progress.UpdatedAt.Equal(b.Progress.UpdatedAt)
}

// handleJobEvents streams the job's coalesced change events (what MCP
// resource subscriptions are built on) until the job ends.
func (s *Server) handleJobEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	events, cancel, err := s.jx.Subscribe(ctx, r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	defer cancel()
	sw := startSSE(w)
	keep := time.NewTicker(sseKeepalive)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			if sw.comment("keepalive") != nil {
				return
			}
		case ev, ok := <-events:
			if !ok {
				return
			}
			if sw.event("change", "", JobEvent{JobID: ev.JobID, Status: ev.Status, Output: ev.Output, Progress: ev.Progress, Done: ev.Done}) != nil {
				return
			}
		}
	}
}

// int64Param reads a non-negative integer query parameter (values past
// int64 are an error, never a wrap).
func int64Param(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &engine.RequestError{Field: name, Message: fmt.Sprintf("must be an integer from 0 to %d, got %q", int64(math.MaxInt64), v)}
	}
	return n, nil
}

func intParam(q url.Values, name string) (int, error) {
	n, err := int64Param(q, name)
	return int(n), err
}

// floatParam reads a number of seconds: finite and >= 0 (strconv accepts
// "NaN" and "Inf", which are refused here).
func floatParam(q url.Values, name string) (float64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, &engine.RequestError{Field: name, Message: fmt.Sprintf("must be a finite number of seconds >= 0, got %q", v)}
	}
	return f, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &engine.RequestError{Field: name, Message: fmt.Sprintf("must be true or false, got %q", v)}
	}
	return b, nil
}

// admittedJobs is admitted for an executor with jobs: sync runs (including
// smart-async ones) are admitted and counted; job calls pass through (the
// job queue has its own limits and busy error).
type admittedJobs struct {
	executor.JobExecutor
	sessionMethods
	a *admitted
}

var _ executor.JobExecutor = (*admittedJobs)(nil)

func (x *admittedJobs) Run(ctx context.Context, req engine.Request, progress executor.ProgressFunc) (engine.Result, error) {
	return x.a.Run(ctx, req, progress)
}

func (x *admittedJobs) Batch(ctx context.Context, req executor.BatchRequest, progress executor.ProgressFunc) (executor.BatchResult, error) {
	return x.a.Batch(ctx, req, progress)
}

// RunOrHandoff holds an admission slot until the result or the handoff.
func (x *admittedJobs) RunOrHandoff(ctx context.Context, req engine.Request, opts executor.SyncOptions, progress executor.ProgressFunc) (executor.Outcome, error) {
	if err := x.a.acquire(1); err != nil {
		x.a.m.runs.WithLabelValues(outcomeBusy).Inc()
		return executor.Outcome{}, err
	}
	defer x.a.release(1)
	start := time.Now()
	o, err := x.JobExecutor.RunOrHandoff(ctx, req, opts, progress)
	switch {
	case o.Result != nil:
		x.a.observe(*o.Result, err, time.Since(start))
		x.a.runs.Add(routeOf(ctx), start, req, *o.Result, err)
	case err != nil:
		x.a.observe(engine.Result{}, err, time.Since(start))
		x.a.runs.Add(routeOf(ctx), start, req, engine.Result{}, err)
	default: // the run goes on as a job: the audit page lists it with the jobs
		x.a.m.runs.WithLabelValues(outcomeHandoff).Inc()
	}
	return o, err
}

func (x *admittedJobs) Start(ctx context.Context, req engine.Request, label string) (jobs.Job, error) {
	j, err := x.JobExecutor.Start(ctx, req, label)
	if err == nil {
		x.a.m.jobsStarted.Inc()
	}
	return j, err
}

// jobErrorStatus classifies the jobs package's errors.
func jobErrorStatus(err error) *apiError {
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return newAPIError(http.StatusNotFound, CodeNotFound, "%v", err)
	case errors.Is(err, jobs.ErrBusy):
		return newAPIError(http.StatusTooManyRequests, CodeBusy, "%v", err)
	case errors.Is(err, jobs.ErrClosed):
		return newAPIError(http.StatusServiceUnavailable, CodeUnavailable, "%v", err)
	case errors.Is(err, jobs.ErrForeign):
		return newAPIError(http.StatusConflict, CodeConflict, "%v", err)
	case jobs.IsStorageFull(err):
		msg := err.Error()
		if !errors.Is(err, jobs.ErrStateFull) {
			msg = "the server's state dir is full: " + msg + "; free space there, or remove finished jobs (POST /v1/jobs/prune)"
		}
		return newAPIError(http.StatusInsufficientStorage, CodeStorageFull, "%s", msg)
	}
	return nil
}

// Artifact implements executor.JobArtifacts when the wrapped executor does.
func (x *admittedJobs) Artifact(ctx context.Context, id, name string) ([]byte, string, error) {
	ax, ok := x.JobExecutor.(executor.JobArtifacts)
	if !ok {
		return nil, "", newAPIError(http.StatusNotImplemented, CodeInternal, "this server keeps no job artifacts")
	}
	return ax.Artifact(ctx, id, name)
}

package httpapi

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
)

// MediaNDJSON asks /v1/run and /v1/batch to stream progress lines before the
// result (see StreamLine).
const MediaNDJSON = "application/x-ndjson"

// writeGrace bounds each response write, so a client that stops reading
// cannot pin a handler forever (the server has no global WriteTimeout:
// runs may legitimately last many minutes).
const writeGrace = 30 * time.Second

// ProgressEvent is a heartbeat of a running call, sent at least every
// second on a streamed response.
type ProgressEvent struct {
	ElapsedSeconds float64 `json:"elapsed_seconds" jsonschema:"Seconds since the call started."`
	StdoutBytes    int64   `json:"stdout_bytes" jsonschema:"Bytes written to stdout so far (all entries of a batch)."`
	StderrBytes    int64   `json:"stderr_bytes" jsonschema:"Bytes written to stderr so far (all entries of a batch)."`
	Done           int     `json:"done,omitempty" jsonschema:"Batch entries finished (batches only)."`
	Total          int     `json:"total,omitempty" jsonschema:"Batch entries submitted (batches only)."`
	Message        string  `json:"message,omitempty" jsonschema:"Human-readable summary of the progress."`
}

// StreamLine is one line of a streamed (application/x-ndjson) response:
// zero or more progress lines, then exactly one line with result or error.
type StreamLine[T any] struct {
	Progress *ProgressEvent `json:"progress,omitempty" jsonschema:"A heartbeat while the call runs."`
	Result   *T             `json:"result,omitempty" jsonschema:"The final result; the last line of the stream."`
	Error    *ErrorDetail   `json:"error,omitempty" jsonschema:"The call failed after streaming began; the last line of the stream."`
	Handoff  *RunHandoff    `json:"handoff,omitempty" jsonschema:"POST /v1/run with sync_budget only: the run outlived its budget and goes on as a background job; the last line of the stream."`
	Job      *jobs.Job      `json:"job,omitempty" jsonschema:"POST /v1/run with keep_job only: the job the run is, as soon as it exists."`
}

func toEvent(p executor.Progress) *ProgressEvent {
	return &ProgressEvent{ElapsedSeconds: p.ElapsedSeconds, StdoutBytes: p.StdoutBytes, StderrBytes: p.StderrBytes, Done: p.Done, Total: p.Total, Message: p.Message}
}

func fromEvent(e *ProgressEvent) executor.Progress {
	return executor.Progress{ElapsedSeconds: e.ElapsedSeconds, StdoutBytes: e.StdoutBytes, StderrBytes: e.StderrBytes, Done: e.Done, Total: e.Total, Message: e.Message}
}

// decode reads one JSON object of at most limit bytes into v, as a stream
// (decode.go). strict rejects unknown fields (a misspelt field is named,
// with the one probably meant, not ignored).
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any, strict bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return newAPIError(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type must be application/json, got %q", ct)
		}
	}
	if r.ContentLength > limit {
		return &http.MaxBytesError{Limit: limit}
	}
	return decodeObject(http.MaxBytesReader(w, r.Body, limit), v, strict)
}

func wantsNDJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if mediaIn(v, MediaNDJSON) {
			return true
		}
	}
	return false
}

// mediaIn reports whether an Accept header value lists media type mt.
func mediaIn(accept, mt string) bool {
	for _, part := range strings.Split(accept, ",") {
		t, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(t), mt) {
			return true
		}
	}
	return false
}

// stream writes an application/x-ndjson response. The status line is held
// back until the first progress beat, so a request rejected at once still
// gets its proper status (400, 429) and error body.
type stream[T any] struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	enc     *json.Encoder
	started bool
	closed  bool
}

func newStream[T any](w http.ResponseWriter) *stream[T] {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &stream[T]{w: w, rc: http.NewResponseController(w), enc: enc}
}

func (s *stream[T]) start() {
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", MediaNDJSON)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
}

func (s *stream[T]) line(l StreamLine[T]) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeGrace))
	_ = s.enc.Encode(l)
	_ = s.rc.Flush()
}

func (s *stream[T]) progress(p executor.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.start()
	s.line(StreamLine[T]{Progress: toEvent(p)})
}

func (s *stream[T]) job(j jobs.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	j.Request = nil
	s.start()
	s.line(StreamLine[T]{Job: &j})
}

func (s *stream[T]) handoff(h *RunHandoff) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.start()
	s.line(StreamLine[T]{Handoff: h})
}

func (s *stream[T]) finish(v T, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if err != nil && !s.started {
		writeError(s.w, err)
		return
	}
	s.start()
	if err != nil {
		d := toAPIError(err).Detail
		s.line(StreamLine[T]{Error: &d})
		return
	}
	s.line(StreamLine[T]{Result: &v})
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	if err := decode(w, r, s.runBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	budget, err := engine.Seconds("sync_budget", req.SyncBudget, 0, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	if budget > 0 || req.KeepJob || (req.OutputBudget > 0 && s.jx != nil) {
		s.runOrHandoff(w, r, req, budget)
		return
	}
	if wantsNDJSON(r) {
		st := newStream[engine.Result](w)
		res, err := s.ex.Run(r.Context(), req.Request, st.progress)
		st.finish(res, err)
		return
	}
	res, err := s.ex.Run(r.Context(), req.Request, nil)
	s.reply(w, res, err)
}

// runOrHandoff is the smart-async run: the result within the budget, or
// 202 with the job the run continues as.
func (s *Server) runOrHandoff(w http.ResponseWriter, r *http.Request, req RunRequest, budget time.Duration) {
	if s.jx == nil {
		writeError(w, &engine.RequestError{Field: "sync_budget", Message: "this server runs no background jobs; leave sync_budget unset"})
		return
	}
	opts := executor.SyncOptions{Budget: budget, Label: req.JobLabel, Keep: req.KeepJob, OutputBudget: req.OutputBudget}
	var st *stream[engine.Result]
	var progress executor.ProgressFunc
	if wantsNDJSON(r) {
		st = newStream[engine.Result](w)
		progress = st.progress
		if req.KeepJob {
			opts.OnJob = st.job
		}
	}
	o, err := s.jx.RunOrHandoff(r.Context(), req.Request, opts, progress)
	var h *RunHandoff
	if err == nil && o.Result == nil {
		h = &RunHandoff{Job: o.Job}
		if o.Output != nil {
			h.Output = *o.Output
		}
		h.Job.Request = nil
	}
	switch {
	case st != nil && h != nil:
		st.handoff(h)
	case st != nil:
		var res engine.Result
		if o.Result != nil {
			res = *o.Result
		}
		st.finish(res, err)
	case err != nil:
		writeError(w, err)
	case h != nil:
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeGrace))
		writeJSON(w, http.StatusAccepted, h)
	default:
		s.reply(w, *o.Result, nil)
	}
}

func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	var req executor.BatchRequest
	if err := decode(w, r, s.batchBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	if wantsNDJSON(r) {
		st := newStream[executor.BatchResult](w)
		out, err := s.ex.Batch(r.Context(), req, st.progress)
		st.finish(out, err)
		return
	}
	out, err := s.ex.Batch(r.Context(), req, nil)
	s.reply(w, out, err)
}

func (s *Server) reply(w http.ResponseWriter, v any, err error) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeGrace))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	info, err := s.ex.Info(r.Context())
	s.reply(w, info, err)
}

// Health is the body of GET /health (no token needed).
type Health struct {
	Status           string `json:"status" jsonschema:"Always healthy while the server answers (a draining server answers 503)."`
	Version          string `json:"version" jsonschema:"pyexec version."`
	WorkingDirectory string `json:"working_directory,omitempty" jsonschema:"The workspace scripts run in (the seed's working directory); only shown to authorized callers."`
	RunsInFlight     int64  `json:"runs_in_flight" jsonschema:"Runs executing right now."`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := Health{Status: "healthy", Version: s.opts.Version, RunsInFlight: s.adm.n.Load()}
	if s.authorized(r) {
		h.WorkingDirectory = s.opts.Workspace
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := OpenAPI(s.opts.Version)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc)
}

// ExecuteRequest is the uv-exec-mcp seed's POST /execute body.
type ExecuteRequest struct {
	ScriptPath string  `json:"script_path" jsonschema:"Path of a .py file inside the working directory (relative to it)."`
	Timeout    float64 `json:"timeout,omitempty" jsonschema:"Timeout in seconds (default 30), capped by the server's maximum (MAX_SCRIPT_TIMEOUT)."`
}

// ExecuteResponse is the seed's POST /execute result, with pyexec's extra
// fields alongside (exit_code and elapsed_seconds as everywhere else in
// pyexec; return_code and execution_time as the seed's client reads them).
type ExecuteResponse struct {
	Success           bool    `json:"success" jsonschema:"True when the script exited with status 0 and did not time out."`
	Stdout            string  `json:"stdout" jsonschema:"Standard output."`
	Stderr            string  `json:"stderr" jsonschema:"Standard error."`
	ReturnCode        int     `json:"return_code" jsonschema:"Exit status (negative signal number when killed)."`
	ExitCode          int     `json:"exit_code" jsonschema:"Same as return_code."`
	ExecutionTime     float64 `json:"execution_time" jsonschema:"Wall time in seconds."`
	ElapsedSeconds    float64 `json:"elapsed_seconds" jsonschema:"Same as execution_time."`
	TimedOut          bool    `json:"timed_out" jsonschema:"True when the script was killed by its timeout."`
	ScriptPath        string  `json:"script_path" jsonschema:"The script_path that was run, as given."`
	WorkingDirectory  string  `json:"working_directory" jsonschema:"The server's working directory (workspace)."`
	ExecutionStrategy string  `json:"execution_strategy" jsonschema:"How the interpreter was chosen."`
	PythonVersionUsed string  `json:"python_version_used" jsonschema:"Version of the interpreter that ran the script."`
}

// ExecuteError is an error from POST /execute: pyexec's error object plus
// FastAPI's "detail" string that the seed's clients print.
type ExecuteError struct {
	Error  ErrorDetail `json:"error" jsonschema:"What went wrong."`
	Detail string      `json:"detail" jsonschema:"The same message, where FastAPI clients look for it."`
}

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) {
		ae := toAPIError(err)
		msg := ae.Detail.Message
		if ae.Detail.Field != "" {
			msg = ae.Detail.Field + ": " + msg
		}
		if ae.Status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, ae.Status, ExecuteError{Error: ae.Detail, Detail: msg})
	}
	var req ExecuteRequest
	if err := decode(w, r, s.runBodyLimit, &req, false); err != nil {
		fail(err)
		return
	}
	if req.ScriptPath == "" {
		fail(&engine.RequestError{Field: "script_path", Message: "is required: the path of a .py file in the working directory"})
		return
	}
	res, err := s.ex.Run(r.Context(), engine.Request{ScriptPath: req.ScriptPath, Timeout: req.Timeout}, nil)
	if err != nil {
		fail(err)
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeGrace))
	writeJSON(w, http.StatusOK, ExecuteResponse{
		Success: res.Success, Stdout: res.Stdout, Stderr: res.Stderr,
		ReturnCode: res.ExitCode, ExitCode: res.ExitCode,
		ExecutionTime: res.ElapsedSeconds, ElapsedSeconds: res.ElapsedSeconds,
		TimedOut: res.TimedOut, ScriptPath: req.ScriptPath, WorkingDirectory: s.opts.Workspace,
		ExecutionStrategy: res.ExecutionStrategy, PythonVersionUsed: res.PythonVersionUsed,
	})
}

// jsonField drops the Go names of embedded structs from a decoding error's
// field path ("Request.code" is the wire's "code").
func jsonField(path string) string {
	parts := strings.Split(path, ".")
	out := parts[:0]
	for _, p := range parts {
		if p != "" && (p[0] < 'A' || p[0] > 'Z') {
			out = append(out, p)
		}
	}
	return strings.Join(out, ".")
}

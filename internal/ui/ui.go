// Package ui is pyexec serve's audit page: a read-only view, at /ui, of what
// agents ran (recent synchronous runs and background jobs, filterable), the
// live output of a running job, the dependency environment cache, the warm
// interpreters, the live sessions and the workspace's files. It is plain HTML, CSS and a little JavaScript embedded
// in the binary: no build step, no framework, nothing fetched from elsewhere.
//
// The page only reads. Authentication is the server's (internal/httpapi
// mounts this handler behind its token check); this package serves data.
package ui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/session"
	"github.com/pyexec/pyexec/internal/uvenv"
	"github.com/pyexec/pyexec/internal/workspace"
)

//go:embed assets
var assets embed.FS

// Path is where the page is mounted.
const Path = "/ui"

// maxListed bounds how many runs and jobs one activity request returns.
const maxListed = 200

// Options are the page's data sources. Only Info is required.
type Options struct {
	// Info describes the server (version, sandbox, warm-pool counts).
	Info func(context.Context) (executor.Info, error)
	// Runs are the recent synchronous runs (nil: none recorded).
	Runs *RunLog
	// Jobs lists background jobs (nil: the executor runs none).
	Jobs executor.JobExecutor
	// JobOutput streams a job's output as server-sent events: the REST
	// API's GET /v1/jobs/{id}/output handler, reading the "id" path value.
	JobOutput http.Handler
	// Envs lists the cached dependency environments (nil: not shown).
	Envs func(context.Context) ([]uvenv.EnvInfo, error)
	// Sessions lists the live Python sessions (nil: the server has none).
	Sessions func(context.Context) ([]session.Info, error)
	// Files lists the workspace's top level (nil: not shown).
	Files func(context.Context) ([]workspace.FileInfo, error)
}

// Handler serves the page and its read-only JSON under Path.
func Handler(o Options) http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	h := &handler{o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, h.page(static))
	mux.HandleFunc("GET "+Path+"/{$}", h.page(static))
	mux.Handle("GET "+Path+"/static/", http.StripPrefix(Path+"/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Path+"/api/activity", h.activity)
	mux.HandleFunc("GET "+Path+"/api/state", h.state)
	if o.Jobs != nil {
		mux.HandleFunc("GET "+Path+"/api/jobs/{id}", h.job)
		if o.JobOutput != nil {
			mux.Handle("GET "+Path+"/api/jobs/{id}/output", o.JobOutput)
		}
	}
	return secureHeaders(mux)
}

// secureHeaders keeps the page to itself: no inline or foreign scripts, no
// framing, no referrer (the login URL carries the token once).
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

type handler struct{ o Options }

func (h *handler) page(static fs.FS) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(static, "index.html")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(b)
	}
}

// Activity is what the page's table shows: recent sync runs and jobs.
type Activity struct {
	Runs        []RunRecord `json:"runs"`
	Jobs        []jobs.Job  `json:"jobs"`
	JobsEnabled bool        `json:"jobs_enabled"`
	JobsTotal   int         `json:"jobs_total"`
	Note        string      `json:"note"`
}

func (h *handler) activity(w http.ResponseWriter, r *http.Request) {
	limit := maxListed
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit must be a positive integer"})
			return
		}
		limit = min(n, maxListed)
	}
	a := Activity{Runs: h.o.Runs.Recent(limit), Jobs: []jobs.Job{},
		Note: "Synchronous runs are kept in memory since the server started (the last " + strconv.Itoa(DefaultRunLogSize) + "); jobs come from the job store."}
	if a.Runs == nil {
		a.Runs = []RunRecord{}
	}
	if h.o.Jobs != nil {
		a.JobsEnabled = true
		l, err := h.o.Jobs.Jobs(r.Context(), jobs.Filter{Limit: limit, IncludeRequest: true})
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "listing jobs: " + err.Error()})
			return
		}
		for i := range l.Jobs {
			trimRequest(&l.Jobs[i])
		}
		a.Jobs, a.JobsTotal = l.Jobs, l.Total
	}
	writeJSON(w, http.StatusOK, a)
}

// trimRequest keeps what the table shows of a job's request: its code (cut
// like a run's), script and label; env_vars and stdin stay out of the page.
func trimRequest(j *jobs.Job) {
	if j.Request == nil {
		return
	}
	cut := *j.Request
	cut.EnvVars, cut.Stdin = nil, ""
	if len(cut.Code) > maxCodeShown {
		cut.Code = cut.Code[:maxCodeShown]
	}
	j.Request = &cut
}

// State is the server's side of the page: caches, warm pool, sessions and
// the workspace's top level.
type State struct {
	Version   string          `json:"version"`
	Workspace string          `json:"workspace"`
	Sandbox   string          `json:"sandbox"`
	RunsAs    string          `json:"runs_as"`
	Warm      any             `json:"warm"` // engine.WarmStats, or null when warm interpreters are off
	Envs      []uvenv.EnvInfo `json:"envs"`
	EnvsError string          `json:"envs_error,omitempty"`
	// Sessions and Files are nil when the server offers none; their
	// *Error says why a listing failed.
	Sessions      []session.Info       `json:"sessions"`
	SessionsError string               `json:"sessions_error,omitempty"`
	Files         []workspace.FileInfo `json:"files"`
	FilesError    string               `json:"files_error,omitempty"`
	Now           time.Time            `json:"now"`
}

func (h *handler) state(w http.ResponseWriter, r *http.Request) {
	info, err := h.o.Info(r.Context())
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server info: " + err.Error()})
		return
	}
	st := State{
		Version: info.Version, Workspace: info.Workspace, RunsAs: info.Sandbox.RunsAs,
		Sandbox: info.Sandbox.Policy + ", network " + info.Sandbox.Network,
		Envs:    []uvenv.EnvInfo{}, Now: time.Now().UTC(),
	}
	if info.Warm != nil {
		st.Warm = info.Warm
	}
	if h.o.Envs != nil {
		envs, err := h.o.Envs(r.Context())
		if err != nil {
			st.EnvsError = err.Error()
		} else if envs != nil {
			st.Envs = envs
		}
	}
	if h.o.Sessions != nil {
		st.Sessions = []session.Info{}
		if l, err := h.o.Sessions(r.Context()); err != nil {
			st.SessionsError = err.Error()
		} else if l != nil {
			st.Sessions = l
		}
	}
	if h.o.Files != nil {
		st.Files = []workspace.FileInfo{}
		if l, err := h.o.Files(r.Context()); err != nil {
			st.FilesError = err.Error()
		} else if l != nil {
			st.Files = l
		}
	}
	writeJSON(w, http.StatusOK, st)
}

func (h *handler) job(w http.ResponseWriter, r *http.Request) {
	j, err := h.o.Jobs.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, jobs.ErrNotFound) {
			code = http.StatusNotFound
		}
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	trimRequest(&j)
	writeJSON(w, http.StatusOK, j)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

package httpapi

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/scripts"
)

// Saved and autosaved scripts over REST, served when the server has a
// script store: they live where runs do, so `pyexec mcp --executor URL`
// keeps them here (Client implements executor.Scripts with these routes).
//
//	POST /v1/scripts            save a script (201 + its entry)
//	GET  /v1/scripts            list (include_autosaved)
//	GET  /v1/scripts/{name}     one script with its source (autosaved)
//	POST /v1/autosaves          keep an inline run's code (202; dropped when the writer is behind)
//	POST /v1/autosaves/cleanup  remove the autosaved code of jobs that no longer exist

// SaveScriptRequest is the body of POST /v1/scripts.
type SaveScriptRequest struct {
	Name           string   `json:"name" jsonschema:"Name to save under: letters, digits, '_', '-' and '.', at most 64 characters (a trailing .py is dropped)."`
	Code           string   `json:"code" jsonschema:"The script's Python source."`
	Dependencies   []string `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements written into a PEP 723 header."`
	RequiresPython string   `json:"requires_python,omitempty" jsonschema:"requires-python for the PEP 723 header, like >=3.11."`
	Overwrite      bool     `json:"overwrite,omitempty" jsonschema:"Replace an existing script of that name (default false: saving over one is an error)."`
}

// ScriptList is the body of GET /v1/scripts.
type ScriptList struct {
	Scripts []scripts.Entry `json:"scripts" jsonschema:"Saved scripts by name, then (when asked) autosaved runs newest first."`
	Count   int             `json:"count" jsonschema:"Number of entries."`
}

// AutosaveRequest is the body of POST /v1/autosaves.
type AutosaveRequest struct {
	Tool      string         `json:"tool" jsonschema:"The tool (or front end) that ran the code."`
	Code      string         `json:"code" jsonschema:"The inline code that ran."`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"The call's other arguments (env_vars values redacted)."`
	JobID     string         `json:"job_id,omitempty" jsonschema:"The background job that ran it, if any."`
}

func (s *Server) scriptRoutes(handle func(pattern, name string, o routeOpts, h http.Handler)) {
	handle("/v1/scripts", "scripts", routeOpts{}, methods{http.MethodGet: s.handleListScripts, http.MethodPost: s.handleSaveScript})
	handle("/v1/scripts/{name}", "script", routeOpts{}, methods{http.MethodGet: s.handleViewScript})
	handle("/v1/autosaves", "autosave", routeOpts{}, methods{http.MethodPost: s.handleAutosave})
	handle("/v1/autosaves/cleanup", "autosave_cleanup", routeOpts{}, methods{http.MethodPost: s.handleCleanupAutosaves})
}

// handleCleanupAutosaves removes the autosaved code of jobs that no longer
// exist (what py_cleanup_jobs does after a prune).
func (s *Server) handleCleanupAutosaves(w http.ResponseWriter, r *http.Request) {
	n, err := executor.LocalScripts{Store: s.opts.Scripts, Jobs: s.jx}.RemoveOrphanedAutosaves(r.Context())
	s.reply(w, map[string]int{"removed": n}, err)
}

func (s *Server) handleSaveScript(w http.ResponseWriter, r *http.Request) {
	var req SaveScriptRequest
	if err := decode(w, r, s.runBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	e, err := s.opts.Scripts.Save(scripts.SaveRequest{Name: req.Name, Code: req.Code, Dependencies: req.Dependencies, RequiresPython: req.RequiresPython, Overwrite: req.Overwrite})
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/scripts/"+url.PathEscape(e.Name))
	writeJSON(w, http.StatusCreated, e)
}

func (s *Server) handleListScripts(w http.ResponseWriter, r *http.Request) {
	auto, err := boolParam(r.URL.Query(), "include_autosaved")
	if err != nil {
		writeError(w, err)
		return
	}
	list, err := s.opts.Scripts.List(auto)
	s.reply(w, ScriptList{Scripts: list, Count: len(list)}, err)
}

func (s *Server) handleViewScript(w http.ResponseWriter, r *http.Request) {
	auto, err := boolParam(r.URL.Query(), "autosaved")
	if err != nil {
		writeError(w, err)
		return
	}
	sc, err := s.opts.Scripts.View(r.PathValue("name"), auto)
	s.reply(w, sc, err)
}

func (s *Server) handleAutosave(w http.ResponseWriter, r *http.Request) {
	var req AutosaveRequest
	if err := decode(w, r, s.runBodyLimit, &req, true); err != nil {
		writeError(w, err)
		return
	}
	name := s.opts.Scripts.Autosave(scripts.AutosaveRecord{Tool: req.Tool, Code: req.Code, Arguments: req.Arguments, JobID: req.JobID})
	writeJSON(w, http.StatusAccepted, map[string]string{"name": name})
}

// scriptErrorStatus classifies the scripts package's errors.
func scriptErrorStatus(err error) *apiError {
	var fe *scripts.FieldError
	switch {
	case errors.As(err, &fe):
		return &apiError{Status: http.StatusBadRequest, Detail: ErrorDetail{Code: CodeInvalidRequest, Field: fe.Field, Message: fe.Err.Error()}}
	case errors.Is(err, scripts.ErrNotFound):
		return newAPIError(http.StatusNotFound, CodeNotFound, "%v", err)
	}
	return nil
}

package httpapi

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/quality"
	"github.com/pyexec/pyexec/internal/scripts"
	"github.com/pyexec/pyexec/internal/session"
	"github.com/pyexec/pyexec/internal/workspace"
)

// The OpenAPI 3.1 document is generated from the very Go types the handlers
// decode and encode (jsonschema.For, as the MCP tools' schemas are), so it
// cannot drift from them; a test validates real responses against it.

type schemaEntry struct {
	name   string
	schema func() (*jsonschema.Schema, error)
}

func forType[T any]() func() (*jsonschema.Schema, error) {
	return func() (*jsonschema.Schema, error) { return jsonschema.For[T](nil) }
}

var componentSchemas = []schemaEntry{
	{"RunRequest", forType[RunRequest]()},
	{"RunHandoff", forType[RunHandoff]()},
	{"RunResult", forType[engine.Result]()},
	{"RunStreamLine", forType[StreamLine[engine.Result]]()},
	{"BatchRequest", forType[executor.BatchRequest]()},
	{"BatchResult", forType[executor.BatchResult]()},
	{"BatchStreamLine", forType[StreamLine[executor.BatchResult]]()},
	{"Info", forType[executor.Info]()},
	{"Health", forType[Health]()},
	{"Error", forType[ErrorBody]()},
	{"ExecuteRequest", forType[ExecuteRequest]()},
	{"ExecuteResponse", forType[ExecuteResponse]()},
	{"ExecuteError", forType[ExecuteError]()},
	{"StartJobRequest", forType[StartJobRequest]()},
	{"Job", forType[jobs.Job]()},
	{"JobList", forType[jobs.JobList]()},
	{"OutputChunk", forType[jobs.Chunk]()},
	{"PruneRequest", forType[PruneRequest]()},
	{"PruneResult", forType[jobs.PruneResult]()},
	{"JobEvent", forType[JobEvent]()},
	{"EnvList", forType[executor.EnvList]()},
	{"EnvInfo", forType[executor.EnvInfo]()},
	{"EnvCreateRequest", forType[executor.EnvCreateRequest]()},
	{"EnvStreamLine", forType[StreamLine[executor.EnvInfo]]()},
	{"EnvDeleteResult", forType[executor.EnvDeleteResult]()},
	{"FormatRequest", forType[quality.FormatRequest]()},
	{"FormatResult", forType[quality.FormatResult]()},
	{"LintRequest", forType[quality.LintRequest]()},
	{"LintResult", forType[quality.LintResult]()},
	{"ProfileRequest", forType[executor.ProfileRequest]()},
	{"ProfileResult", forType[executor.ProfileResult]()},
	{"ProfileStreamLine", forType[StreamLine[executor.ProfileResult]]()},
	{"FileInfo", forType[workspace.FileInfo]()},
	{"FileList", forType[executor.FileList]()},
	{"SaveScriptRequest", forType[SaveScriptRequest]()},
	{"ScriptEntry", forType[scripts.Entry]()},
	{"ScriptList", forType[ScriptList]()},
	{"Script", forType[scripts.Script]()},
	{"AutosaveRequest", forType[AutosaveRequest]()},
	{"SessionCreateRequest", forType[session.CreateRequest]()},
	{"SessionRunRequest", forType[SessionRunRequest]()},
	{"Session", forType[session.Info]()},
	{"SessionList", forType[SessionList]()},
	{"SessionCellResult", forType[session.CellResult]()},
	{"SessionHistory", forType[session.History]()},
	{"SessionExportRequest", forType[SessionExportRequest]()},
	{"SessionExportResult", forType[executor.SessionExportResult]()},
}

var openAPIDoc = sync.OnceValues(buildOpenAPI)

// OpenAPI returns the OpenAPI 3.1 document of the REST API (JSON).
func OpenAPI(version string) ([]byte, error) {
	doc, err := openAPIDoc()
	if err != nil {
		return nil, err
	}
	// The version is the only per-server part.
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	m["info"].(map[string]any)["version"] = version
	return json.MarshalIndent(m, "", "  ")
}

type obj = map[string]any

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func jsonContent(schema string) obj {
	return obj{"application/json": obj{"schema": ref(schema)}}
}

func resp(desc, schema string) obj {
	return obj{"description": desc, "content": jsonContent(schema)}
}

func errResp(desc string) obj { return resp(desc, "Error") }

func buildOpenAPI() ([]byte, error) {
	schemas := obj{}
	for _, e := range componentSchemas {
		s, err := e.schema()
		if err != nil {
			return nil, fmt.Errorf("openapi schema %s: %w", e.name, err)
		}
		schemas[e.name] = s
	}
	common := func(extra obj) obj {
		r := obj{
			"401": errResp("Missing or wrong bearer token."),
			"405": errResp("Method not allowed on this path (the Allow header lists the right ones)."),
			"403": errResp("Refused: a non-loopback Host on a loopback server (DNS rebinding protection) or a cross-origin browser request."),
			"503": errResp("The server is shutting down."),
		}
		for k, v := range extra {
			r[k] = v
		}
		return r
	}
	runBody := func(schema string) obj {
		return obj{"required": true, "content": jsonContent(schema)}
	}
	streamed := func(result, line string) obj {
		return obj{
			"description": "The result. With `Accept: " + MediaNDJSON + "` the response streams one JSON object per line: " +
				"`{\"progress\": ...}` heartbeats (about every 0.5 s) while the call runs, then one final `{\"result\": ...}` " +
				"(or `{\"error\": ...}` if the call failed after streaming began). A request rejected before it starts still " +
				"gets its 4xx status and an Error body.",
			"content": obj{
				"application/json": obj{"schema": ref(result)},
				MediaNDJSON:        obj{"schema": ref(line)},
			},
		}
	}
	runErrors := obj{
		"400": errResp("The request was rejected before running; `field` names what to change."),
		"413": errResp("The body exceeds the largest request (6 MiB; a batch 26 MiB)."),
		"415": errResp("The body is not JSON."),
		"429": errResp("Busy: too many runs in flight, or too many request bodies held (--max-body-memory); retry after the Retry-After seconds."),
		"507": errResp("The server's state dir is full: free space there or prune jobs."),
	}
	sessionName := obj{"name": "name", "in": "path", "required": true, "schema": obj{"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}, "description": "The session's name."}
	paths := obj{
		"/v1/run": obj{"post": obj{
			"operationId": "run",
			"summary":     "Run Python code or a workspace script to completion.",
			"description": "A failed run is a 200 with exit_code != 0; only a rejected request is an error.",
			"requestBody": runBody("RunRequest"),
			"responses": common(merge(runErrors, obj{
				"200": streamed("RunResult", "RunStreamLine"),
				"202": resp("With sync_budget: the run outlived its budget and goes on as a background job (when streamed, the last line is {\"handoff\": ...} instead).", "RunHandoff"),
			})),
		}},
		"/v1/batch": obj{"post": obj{
			"operationId": "batch",
			"summary":     "Run up to 20 independent requests in parallel; results in input order.",
			"requestBody": runBody("BatchRequest"),
			"responses":   common(merge(runErrors, obj{"200": streamed("BatchResult", "BatchStreamLine")})),
		}},
		"/v1/info": obj{"get": obj{
			"operationId": "info",
			"summary":     "Version, workspace, interpreters, uv and limits of the executing side.",
			"responses":   common(obj{"200": resp("Server information.", "Info")}),
		}},
		"/health": obj{"get": obj{
			"operationId": "health",
			"summary":     "Liveness (no token needed).",
			"security":    []any{},
			"responses":   obj{"200": resp("The server is up.", "Health"), "503": errResp("The server is shutting down.")},
		}},
		"/execute": obj{"post": obj{
			"operationId": "execute",
			"summary":     "The uv-exec-mcp seed's API: run a .py file of the working directory.",
			"requestBody": runBody("ExecuteRequest"),
			"responses": common(obj{
				"200": resp("The run's result (a failed run is still a 200).", "ExecuteResponse"),
				"400": resp("Rejected: bad script_path (outside the directory, not .py, missing) or timeout.", "ExecuteError"),
				"413": resp("The body is too large.", "ExecuteError"),
				"415": resp("The body is not JSON.", "ExecuteError"),
				"429": resp("Busy: too many runs in flight.", "ExecuteError"),
			}),
		}},
		"/metrics": obj{"get": obj{
			"operationId": "metrics",
			"summary":     "Prometheus metrics (text exposition format).",
			"responses": common(obj{"200": obj{"description": "Metrics.",
				"content": obj{"text/plain": obj{"schema": obj{"type": "string"}}}}}),
		}},
		"/openapi.json": obj{"get": obj{
			"operationId": "openapi",
			"summary":     "This document.",
			"responses":   common(obj{"200": obj{"description": "OpenAPI 3.1.", "content": obj{"application/json": obj{"schema": obj{"type": "object"}}}}}),
		}},
		"/v1/jobs": obj{
			"post": obj{
				"operationId": "startJob",
				"summary":     "Start a background job (servers with jobs).",
				"requestBody": runBody("StartJobRequest"),
				"responses": common(merge(runErrors, obj{
					"202": resp("The job, pending or running; Location names it.", "Job"),
					"429": errResp("Busy: the queue of pending jobs is full."),
				})),
			},
			"get": obj{
				"operationId": "listJobs",
				"summary":     "Jobs, newest first; total counts all matches before the limit.",
				"parameters": []any{
					query("status", "string", "Only jobs with this status: pending, running, completed, failed or cancelled."),
					query("label", "string", "Only jobs with exactly this job_label."),
					query("limit", "integer", "Most jobs to return (default 50)."),
					query("include_request", "boolean", "Include each job's request (env_vars values redacted)."),
				},
				"responses": common(obj{"200": resp("The jobs.", "JobList"), "400": errResp("A bad parameter; field names it.")}),
			},
		},
		"/v1/jobs/{id}": obj{"get": obj{
			"operationId": "getJob",
			"summary":     "One job: status, timestamps, exit information, script progress.",
			"parameters":  []any{jobID},
			"responses":   common(obj{"200": resp("The job.", "Job"), "404": errResp("No such job.")}),
		}},
		"/v1/jobs/{id}/artifacts/{name}": obj{"get": obj{
			"operationId": "jobArtifact",
			"summary":     "Something the job's run displayed (a figure, an image), as stored: the job's run.artifacts lists them by name (display-N.png).",
			"parameters":  []any{jobID, obj{"name": "name", "in": "path", "required": true, "schema": obj{"type": "string"}, "description": "The artifact's name, from run.artifacts."}},
			"responses": common(obj{
				"200": obj{"description": "The artifact's bytes.", "content": obj{"image/png": obj{"schema": obj{"type": "string", "format": "binary"}}}},
				"404": errResp("No such job or artifact."),
			}),
		}},
		"/v1/jobs/{id}/output": obj{"get": obj{
			"operationId": "jobOutput",
			"summary":     "A job's output after byte offsets; nothing is ever returned twice.",
			"description": "Pass back next_stdout_offset/next_stderr_offset as stdout_offset/stderr_offset. wait long-polls for new output or the end. " +
				"With `Accept: text/event-stream` the answer is a live SSE stream until the job ends: `status` events (the Job, at once and on every status, phase or progress change), " +
				"`output` events (an OutputChunk of new output; the event id is `STDOUT_OFFSET:STDERR_OFFSET`, usable as Last-Event-ID to resume), then one `end` event (the finished Job); `: keepalive` comments every 15 s when idle.",
			"parameters": []any{jobID,
				query("stdout_offset", "integer", "Byte offset in stdout to read from (default 0)."),
				query("stderr_offset", "integer", "Byte offset in stderr to read from (default 0)."),
				query("max_bytes", "integer", "Most bytes of each stream to return (default 262144)."),
				query("wait", "number", "Seconds to wait for new output or the end when there is nothing new yet (at most 120)."),
			},
			"responses": common(obj{
				"200": obj{"description": "New output, or the SSE stream.", "content": obj{
					"application/json":  obj{"schema": ref("OutputChunk")},
					"text/event-stream": obj{"schema": obj{"type": "string"}},
				}},
				"400": errResp("A bad parameter; field names it."),
				"404": errResp("No such job."),
			}),
		}},
		"/v1/jobs/{id}/events": obj{"get": obj{
			"operationId": "jobEvents",
			"summary":     "SSE stream of the job's coalesced change events (`change` events with a JobEvent), until the job ends.",
			"parameters":  []any{jobID},
			"responses": common(obj{
				"200": obj{"description": "The SSE stream.", "content": obj{"text/event-stream": obj{"schema": obj{"type": "string"}}}},
				"404": errResp("No such job."),
			}),
		}},
		"/v1/jobs/{id}/cancel": obj{"post": obj{
			"operationId": "cancelJob",
			"summary":     "Cancel a pending or running job: its whole process tree is killed; its output stays readable.",
			"parameters":  []any{jobID},
			"responses":   common(obj{"200": resp("The job (cancelled, or its final status if it had already finished).", "Job"), "404": errResp("No such job.")}),
		}},
		"/v1/jobs/prune": obj{"post": obj{
			"operationId": "pruneJobs",
			"summary":     "Remove finished jobs and their logs. Pending and running jobs are never removed.",
			"requestBody": obj{"required": false, "content": jsonContent("PruneRequest")},
			"responses":   common(obj{"200": resp("How many were removed.", "PruneResult"), "400": errResp("A bad field.")}),
		}},
		"/v1/envs": obj{
			"get": obj{
				"operationId": "listEnvs",
				"summary":     "The dependency environment cache: every environment, named ones pinned (never evicted).",
				"responses":   common(obj{"200": resp("The environments, most recently used first.", "EnvList")}),
			},
			"post": obj{
				"operationId": "createEnv",
				"summary":     "Build a persistent environment with dependencies on an installed Python and name it; runs use it with env: NAME.",
				"requestBody": runBody("EnvCreateRequest"),
				"responses":   common(merge(runErrors, obj{"200": streamed("EnvInfo", "EnvStreamLine")})),
			},
		},
		"/v1/envs/{name}": obj{"delete": obj{
			"operationId": "deleteEnv",
			"summary":     "Remove a named environment and, unless another name or a running run uses them, its files.",
			"parameters":  []any{obj{"name": "name", "in": "path", "required": true, "schema": obj{"type": "string"}, "description": "The environment's name."}},
			"responses":   common(obj{"200": resp("What was removed.", "EnvDeleteResult"), "400": errResp("No environment has this name, or the name is invalid.")}),
		}},
		"/v1/format": obj{"post": obj{
			"operationId": "format",
			"summary":     "Format code or a workspace script with ruff, confined like a run; the file changes only with write: true.",
			"requestBody": runBody("FormatRequest"),
			"responses":   common(merge(runErrors, obj{"200": resp("The formatted code and diff.", "FormatResult")})),
		}},
		"/v1/lint": obj{"post": obj{
			"operationId": "lint",
			"summary":     "Lint code or a workspace script with ruff (select [\"S\"]: bandit's security rules), confined like a run.",
			"requestBody": runBody("LintRequest"),
			"responses":   common(merge(runErrors, obj{"200": resp("The findings (and with fix, the fixed code).", "LintResult")})),
		}},
		"/v1/profile": obj{"post": obj{
			"operationId": "profile",
			"summary":     "Run a request once under cProfile and return its result with the top functions by cumulative time.",
			"requestBody": runBody("ProfileRequest"),
			"responses":   common(merge(runErrors, obj{"200": streamed("ProfileResult", "ProfileStreamLine")})),
		}},
		"/v1/files/{path}": obj{
			"parameters": []any{obj{"name": "path", "in": "path", "required": true, "schema": obj{"type": "string"},
				"description": "A file relative to the workspace (slashes allowed), or absolute inside it (a leading %2F)."}},
			"get": obj{
				"operationId": "getFile",
				"summary":     "A workspace file's bytes, read with the run user's rights; Range requests are honoured. X-Pyexec-Path names it relative to the workspace.",
				"responses": common(obj{
					"200": obj{"description": "The file.", "content": obj{"application/octet-stream": obj{"schema": obj{"type": "string", "format": "binary"}}}},
					"206": obj{"description": "The requested range.", "content": obj{"application/octet-stream": obj{"schema": obj{"type": "string", "format": "binary"}}}},
					"400": errResp("A path that can never be in the workspace."), "403": errResp("The run user may not read it."),
					"404": errResp("No such file."), "409": errResp("A directory (code is_directory)."),
				}),
			},
			"put": obj{
				"operationId": "putFile",
				"summary":     "Write a workspace file: the raw body, or the first file part of a multipart/form-data body, up to --max-upload. Missing directories are made; a new file (mode 0644) replaces the name only with overwrite=true, never writing through a link.",
				"parameters":  []any{obj{"name": "overwrite", "in": "query", "schema": obj{"type": "boolean"}, "description": "Replace an existing file (default false)."}},
				"requestBody": obj{"required": true, "content": obj{"application/octet-stream": obj{"schema": obj{"type": "string", "format": "binary"}},
					"multipart/form-data": obj{"schema": obj{"type": "object", "properties": obj{"file": obj{"type": "string", "format": "binary"}}}}}},
				"responses": common(obj{
					"200": resp("The file written.", "FileInfo"),
					"400": errResp("A path that can never be in the workspace."), "403": errResp("The run user may not write there."),
					"409": errResp("It exists (code exists: pass overwrite=true) or is a directory (code is_directory)."),
					"413": errResp("Larger than --max-upload."),
				}),
			},
			"delete": obj{
				"operationId": "deleteFile",
				"summary":     "Delete a workspace file or empty directory (a symlink itself, never its target).",
				"responses": common(obj{
					"200": obj{"description": "Deleted.", "content": obj{"application/json": obj{"schema": obj{"type": "object"}}}},
					"403": errResp("The run user may not delete it."), "404": errResp("No such file."), "409": errResp("A directory that is not empty."),
				}),
			},
		},
		"/v1/files": obj{"get": obj{
			"operationId": "listFiles",
			"summary":     "List a workspace directory, optionally recursive (symlinks listed, never followed) and filtered by a shell pattern.",
			"parameters": []any{
				obj{"name": "dir", "in": "query", "schema": obj{"type": "string"}, "description": "Directory relative to the workspace (default: the workspace)."},
				obj{"name": "pattern", "in": "query", "schema": obj{"type": "string"}, "description": "Shell pattern matched against names (or paths below dir when it has a /)."},
				obj{"name": "recursive", "in": "query", "schema": obj{"type": "boolean"}},
				obj{"name": "limit", "in": "query", "schema": obj{"type": "integer"}, "description": "Most entries (default 1000)."},
			},
			"responses": common(obj{"200": resp("The entries.", "FileList"), "400": errResp("A bad dir, pattern or limit."), "404": errResp("No such directory.")}),
		}},
		"/v1/scripts": obj{
			"post": obj{
				"operationId": "saveScript",
				"summary":     "Save a script by name in the server's script store (servers with a store), with a PEP 723 header for its dependencies.",
				"requestBody": runBody("SaveScriptRequest"),
				"responses":   common(obj{"201": resp("The saved script; Location names it.", "ScriptEntry"), "400": errResp("A bad name or field, or the name is taken (pass overwrite).")}),
			},
			"get": obj{
				"operationId": "listScripts",
				"summary":     "Saved scripts by name, then (include_autosaved) the autosaved inline runs, newest first.",
				"parameters":  []any{query("include_autosaved", "boolean", "Also list autosaved inline runs.")},
				"responses":   common(obj{"200": resp("The scripts.", "ScriptList")}),
			},
		},
		"/v1/scripts/{name}": obj{"get": obj{
			"operationId": "viewScript",
			"summary":     "A script's source and JSON sidecar.",
			"parameters": []any{
				obj{"name": "name", "in": "path", "required": true, "schema": obj{"type": "string"}, "description": "The script's name."},
				query("autosaved", "boolean", "Look among autosaved runs instead of saved scripts."),
			},
			"responses": common(obj{"200": resp("The script.", "Script"), "400": errResp("A bad or unknown name.")}),
		}},
		"/v1/autosaves": obj{"post": obj{
			"operationId": "autosave",
			"summary":     "Keep the code of an inline run (what an MCP front end of this server sends); written in the background, dropped when the writer is behind.",
			"requestBody": runBody("AutosaveRequest"),
			"responses":   common(obj{"202": obj{"description": "Queued; name is the autosaved entry's name (empty when it was dropped).", "content": obj{"application/json": obj{"schema": obj{"type": "object"}}}}}),
		}},
		"/v1/sessions": obj{
			"post": obj{
				"operationId": "createSession",
				"summary":     "Start a live Python session (one confined interpreter whose namespace persists across cells).",
				"requestBody": runBody("SessionCreateRequest"),
				"responses": common(obj{"201": resp("The new session; Location names it.", "Session"), "400": errResp("A bad name or setting."),
					"409": errResp("The name is in use (session_error exists), or a lost session of that name is reported (session_error lost)."),
					"429": errResp("--max-sessions reached (session_error limit); the message lists the open sessions.")}),
			},
			"get": obj{
				"operationId": "listSessions",
				"summary":     "Every session, oldest first, lost and expired ones included until their loss was reported.",
				"responses":   common(obj{"200": resp("The sessions.", "SessionList")}),
			},
		},
		"/v1/sessions/{name}": obj{
			"get": obj{
				"operationId": "getSession",
				"summary":     "A session's status, settings, execution_count, times and memory.",
				"parameters":  []any{sessionName},
				"responses":   common(obj{"200": resp("The session.", "Session"), "404": errResp("No such session.")}),
			},
			"delete": obj{
				"operationId": "closeSession",
				"summary":     "Close a session: its whole process tree is killed; the final state (cells, peak memory, CPU) is returned.",
				"parameters":  []any{sessionName},
				"responses":   common(obj{"200": resp("The closed session.", "Session"), "404": errResp("No such session.")}),
			},
		},
		"/v1/sessions/{name}/history": obj{"get": obj{
			"operationId": "sessionHistory",
			"summary":     "The cells a session ran, with outputs (each cut to 64 KiB), results and errors.",
			"parameters":  []any{sessionName},
			"responses":   common(obj{"200": resp("The history.", "SessionHistory"), "404": errResp("No such session.")}),
		}},
		"/v1/sessions/{name}/run": obj{"post": obj{
			"operationId": "runCell",
			"summary":     "Run a cell in the session, creating it (with the body's settings) when the name is free.",
			"description": "An exception is a 200 with error set; a cell that costs the session (memory limit, an interrupt it ignored) is a 200 with status lost and lost_reason.",
			"parameters":  []any{sessionName},
			"requestBody": runBody("SessionRunRequest"),
			"responses": common(merge(runErrors, obj{"200": resp("The cell's result.", "SessionCellResult"),
				"409": errResp("The session is busy with another cell (session_error busy), or it was lost (session_error lost, reported once).")})),
		}},
		"/v1/sessions/{name}/interrupt": obj{"post": obj{
			"operationId": "interruptSession",
			"summary":     "Raise KeyboardInterrupt in the running cell; if it does not stop within the grace, the session is killed (interrupt_failed).",
			"parameters":  []any{sessionName},
			"responses":   common(obj{"200": resp("The session.", "Session"), "404": errResp("No such session.")}),
		}},
		"/v1/sessions/{name}/reset": obj{"post": obj{
			"operationId": "resetSession",
			"summary":     "Replace the session's interpreter by a fresh one with the same settings (no variables, execution_count 0).",
			"parameters":  []any{sessionName},
			"responses":   common(obj{"200": resp("The reset session.", "Session"), "404": errResp("No such session."), "409": errResp("Busy with a cell.")}),
		}},
		"/v1/sessions/{name}/export": obj{"post": obj{
			"operationId": "exportSession",
			"summary":     "Write the session's history as a Jupyter notebook (nbformat 4) at a .ipynb path in the workspace, written confined like a run.",
			"parameters":  []any{sessionName},
			"requestBody": runBody("SessionExportRequest"),
			"responses":   common(obj{"200": resp("Where it was written.", "SessionExportResult"), "400": errResp("A bad path."), "404": errResp("No such session.")}),
		}},
		"/mcp": obj{"post": obj{
			"operationId": "mcp",
			"summary":     "MCP over Streamable HTTP (JSON-RPC; see the MCP specification). Stateless 2026-07-28 requests and session-based 2025-06-18/2025-11-25 clients are both served.",
			"requestBody": obj{"required": true, "content": obj{"application/json": obj{"schema": obj{"type": "object"}}}},
			"responses": common(obj{"200": obj{"description": "JSON-RPC responses, as an SSE stream (progress notifications arrive in it).",
				"content": obj{"text/event-stream": obj{"schema": obj{"type": "string"}}}}}),
		}},
	}
	doc := obj{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"info": obj{
			"title":       "pyexec execution server",
			"version":     "",
			"description": "Runs Python for AI agents and programs: inline code or workspace scripts, with hard timeouts that kill the whole process tree, capped output and measured resources. Errors are `{\"error\": {\"code\", \"message\", \"field\"}}`.",
		},
		"paths": paths,
		"components": obj{
			"schemas": schemas,
			"securitySchemes": obj{
				"bearer": obj{"type": "http", "scheme": "bearer", "description": "The server's token: from --token-file or PYEXEC_TOKEN, else generated into STATE-DIR/server-token. Only a server started with --insecure-no-auth accepts requests without it."},
			},
		},
		"security": []any{obj{"bearer": []any{}}},
	}
	return json.Marshal(doc)
}

var jobID = obj{"name": "id", "in": "path", "required": true, "schema": obj{"type": "string"}, "description": "The job id."}

func query(name, typ, desc string) obj {
	return obj{"name": name, "in": "query", "required": false, "schema": obj{"type": typ}, "description": desc}
}

func merge(a, b obj) obj {
	out := obj{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
)

// The compat toolset: every tool the three seed servers document, under its
// documented name, with its documented parameters and result fields, each a
// thin adapter over the same executor as the core tools. A seed user can
// switch to pyexec without changing a call; the results carry the seed's
// fields plus pyexec's (success, timed_out, byte counts, exact CPU/memory).
//
//   - py-executor: run_python and run_python_batch are core tools and
//     already take its parameters (code, codes, timeout, max_workers, cwd).
//   - uv-exec-mcp: execute_python_script, check_execution_server,
//     test_hello_world_http, test_minimal_http, get_http_server_info
//     (compat_uvexec.go).
//   - python-executor-mcp: run_script_in_dir, run_script_with_dependencies,
//     benchmark_script, py_list_scripts, py_view_script
//     (compat_pyexecmcp.go). Its job tools (run_script_in_dir_async,
//     run_script_with_dependencies_async, list_running_jobs, get_job_output,
//     kill_job, py_job_status, py_list_jobs, py_cancel_job, py_prune_jobs and
//     the job-stream:// resource) need background jobs and are registered
//     with them (see registerJobs).
func (t *tools) registerCompat(srv *mcp.Server) {
	t.registerUVExecCompat(srv)
	t.registerPyExecMCPCompat(srv)
	t.registerPyExecMCPJobsCompat(srv)
	t.registerPyExecMCPRealNames(srv) // compat_real.go: py_run_script_in_dir, ...
	t.registerRoadmapCompat(srv)      // compat_roadmap.go: job_cleanup, stream_deltas, run_script_profile
	t.registerEnvCompat(srv)          // envs.go: environment_cache_list, environment_create_persistent
}

// serverMode says how this MCP server reaches its executor, honestly: the
// embedded default runs Python in this process (no HTTP hop); a remote
// executor is a `pyexec serve` execution server at some URL.
type serverMode struct {
	Mode string // "embedded" or "remote"
	URL  string // remote only
}

// urlExecutor is implemented by executors that talk to a remote server.
type urlExecutor interface{ URL() string }

// engineExecutor is implemented by the in-process executors (Local and the
// ones built on it), which hold the engine itself.
type engineExecutor interface{ Engine() *engine.Engine }

func (t *tools) mode() serverMode {
	if u, ok := t.ex.(urlExecutor); ok {
		return serverMode{Mode: "remote", URL: u.URL()}
	}
	if _, ok := t.ex.(engineExecutor); ok {
		return serverMode{Mode: "embedded"}
	}
	return serverMode{Mode: "remote"}
}

// seedTimeout maps the python-executor-mcp seed's timeout_seconds onto a
// request timeout: absent means the server default, 0 means "no limit",
// which pyexec turns into the server's maximum (every run has a limit).
func (t *tools) seedTimeout(ctx context.Context, seconds *float64) (float64, error) {
	switch {
	case seconds == nil:
		return 0, nil
	case *seconds < 0:
		return 0, fmt.Errorf("timeout_seconds: must be 0 (no limit: the server's maximum) or positive, got %g", *seconds)
	case *seconds > 0:
		return *seconds, nil
	}
	info, err := t.ex.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("timeout_seconds: cannot read the server's maximum: %w", err)
	}
	return info.Limits.MaxTimeoutSeconds, nil
}

// resolvedDependencies is the result's resolved_dependencies, never null:
// the seed documents the field as always present.
func resolvedDependencies(r engine.Result) []string {
	if r.ResolvedDependencies == nil {
		return []string{}
	}
	return r.ResolvedDependencies
}

// errNoJobs rejects async_mode when this server offers no background jobs.
var errNoJobs = errors.New("async_mode: this server offers no background jobs (its executor has none, or neither the jobs nor the compat toolset is on); call without async_mode")

// seedSource fills code or script_path from the seed's script_content /
// script_path pair, which must be exactly one.
func seedSource(req *engine.Request, scriptPath, scriptContent string) error {
	switch {
	case scriptPath != "" && scriptContent != "":
		return errors.New("script_path: give either script_path or script_content, not both")
	case scriptPath == "" && scriptContent == "":
		return errors.New("script_path: give one of script_path (an existing .py file) or script_content (inline source)")
	}
	req.ScriptPath, req.Code = scriptPath, scriptContent
	return nil
}

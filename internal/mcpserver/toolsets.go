package mcpserver

import (
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Toolset names. A toolset is a group of tools registered together, so an
// operator can keep the tool list a model sees short (--toolsets).
const (
	// ToolsetCore: run_python, run_python_batch, server_info,
	// benchmark_python, plan_batch, chunk_code.
	ToolsetCore = "core"
	// ToolsetJobs: background job tools. They arrive with the jobs work;
	// until then this toolset registers nothing.
	ToolsetJobs = "jobs"
	// ToolsetScripts: save_script, list_scripts, view_script.
	ToolsetScripts = "scripts"
	// ToolsetCompat: every tool the three seed servers document, by its
	// documented name, parameters and result fields (see compat*.go).
	ToolsetCompat = "compat"
	// ToolsetQuality: format_code and lint_code, with ruff (quality.go).
	ToolsetQuality = "quality"
	// ToolsetEnvs: env_list, env_create, env_delete (envs.go).
	ToolsetEnvs = "envs"
	// ToolsetFiles: write_file, read_file, list_files and the
	// pyexec://workspace/ resources (files.go).
	ToolsetFiles = "files"
	// ToolsetSessions: session_create, session_list, session_close,
	// session_reset, session_interrupt, session:// resources, and
	// run_python's session field (sessions.go).
	ToolsetSessions = "sessions"
)

// DefaultToolsets is what `pyexec mcp` registers unless told otherwise.
const DefaultToolsets = "core,jobs,scripts,quality,envs,sessions,files"

// toolset is a named group of tools and how to register it.
type toolset struct {
	name     string
	register func(*tools, *mcp.Server)
}

// toolsets lists every toolset in registration order (jobs before compat:
// compat serves the seed's job-stream:// only when jobs did not).
func toolsets() []toolset {
	return []toolset{
		{ToolsetCore, (*tools).registerCore},
		{ToolsetJobs, (*tools).registerJobs},
		{ToolsetScripts, (*tools).registerScripts},
		{ToolsetQuality, (*tools).registerQuality},
		{ToolsetEnvs, (*tools).registerEnvs},
		{ToolsetFiles, (*tools).registerFiles},
		{ToolsetSessions, (*tools).registerSessions},
		{ToolsetCompat, (*tools).registerCompat},
	}
}

// ParseToolsets reads a comma-separated toolset list ("all" = every
// toolset) and rejects unknown names, saying which exist.
func ParseToolsets(spec string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(spec, ",") {
		name := strings.ToLower(strings.TrimSpace(part))
		switch {
		case name == "":
			continue
		case name == "all":
			for _, ts := range toolsets() {
				out = append(out, ts.name)
			}
			continue
		case !slices.ContainsFunc(toolsets(), func(ts toolset) bool { return ts.name == name }):
			return nil, fmt.Errorf("unknown toolset %q; known: %s, all", name, knownToolsets())
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no toolset given; known: %s, all", knownToolsets())
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// registerToolsets registers the named toolsets (nil: the default ones).
func (t *tools) registerToolsets(srv *mcp.Server, names []string) {
	if names == nil {
		names, _ = ParseToolsets(DefaultToolsets)
	}
	for _, ts := range toolsets() {
		if slices.Contains(names, ts.name) {
			ts.register(t, srv)
		}
	}
}

// registerJobs is the jobs toolset: get_job, cancel_job, list_jobs,
// prune_jobs and the job:// resources, when the executor runs background
// jobs (otherwise it is empty and run_python is synchronous only).
func (t *tools) registerJobs(srv *mcp.Server) {
	t.jobs.register(srv) // a nil t.jobs registers nothing
	t.jobsRegistered = t.jobs != nil
}

func knownToolsets() string {
	var names []string
	for _, ts := range toolsets() {
		names = append(names, ts.name)
	}
	return strings.Join(names, ", ")
}

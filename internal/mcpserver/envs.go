package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/executor"
)

// The envs toolset: the dependency environment cache and its named
// environments. A named environment is built once (env_create) and pinned:
// LRU eviction never removes it, and run_python, run_python_batch entries
// and benchmark_python run in it with env: NAME.

// EnvListInput is the input of env_list.
type EnvListInput struct {
	Rendering
}

// EnvCreateInput is the input of env_create.
type EnvCreateInput struct {
	executor.EnvCreateRequest
	Rendering
}

// EnvDeleteInput is the input of env_delete.
type EnvDeleteInput struct {
	Name string `json:"name" jsonschema:"Name of the environment to delete (env_list shows the names)."`
	Rendering
}

// errNoEnvs is the tool error of an executor without environment management.
var errNoEnvs = errors.New("this server's executor does not manage environments (an execution server older than this front end?)")

func (t *tools) envExecutor() (executor.EnvExecutor, error) {
	ex, ok := t.ex.(executor.EnvExecutor)
	if !ok {
		return nil, errNoEnvs
	}
	return ex, nil
}

func (t *tools) registerEnvs(srv *mcp.Server) {
	addTool(t, srv, &mcp.Tool{
		Name:  "env_list",
		Title: "List Python environments",
		Description: "List the cached dependency environments: key, names (named environments are pinned and never evicted), interpreter, requirements, " +
			"installed versions, size, last use, and whether a run uses it now.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.envList)
	addTool(t, srv, &mcp.Tool{
		Name:  "env_create",
		Title: "Create a named Python environment",
		Description: "Build a persistent environment with dependencies (PEP 508) on an installed python_version, once, and name it. " +
			"Runs then use it with env: NAME (run_python, run_python_batch requests, benchmark_python) and start as fast as plain Python. " +
			"It is never evicted; env_delete removes it.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.envCreate)
	addTool(t, srv, &mcp.Tool{
		Name:        "env_delete",
		Title:       "Delete a named Python environment",
		Description: "Remove a named environment and its files (files another name or a running run still uses are kept for later eviction).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, t.envDelete)
}

// registerEnvCompat adds the python-executor-mcp roadmap's names
// (environment_cache_list, environment_create_persistent).
func (t *tools) registerEnvCompat(srv *mcp.Server) {
	addTool(t, srv, &mcp.Tool{
		Name:        "environment_cache_list",
		Title:       "List cached environments (python-executor-mcp roadmap name)",
		Description: "Same as env_list: the cached dependency environments with their names, interpreter, requirements, size and last use.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.envList)
	addTool(t, srv, &mcp.Tool{
		Name:        "environment_create_persistent",
		Title:       "Create a persistent environment (python-executor-mcp roadmap name)",
		Description: "Same as env_create: build a pinned environment with dependencies on python_version under a name, for runs with env: NAME.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.envCreate)
}

func (t *tools) envList(ctx context.Context, _ *mcp.CallToolRequest, in EnvListInput) (*mcp.CallToolResult, executor.EnvList, error) {
	ex, err := t.envExecutor()
	if err != nil {
		return nil, executor.EnvList{}, err
	}
	l, err := ex.Envs(ctx)
	if err != nil {
		return nil, executor.EnvList{}, err
	}
	return render(in.Rendering, l, func() string { return renderEnvList(l) }), l, nil
}

func (t *tools) envCreate(ctx context.Context, req *mcp.CallToolRequest, in EnvCreateInput) (*mcp.CallToolResult, executor.EnvInfo, error) {
	ex, err := t.envExecutor()
	if err != nil {
		return nil, executor.EnvInfo{}, err
	}
	e, err := ex.CreateEnv(ctx, in.EnvCreateRequest, progressTo(ctx, req))
	if err != nil {
		return nil, executor.EnvInfo{}, err
	}
	return render(in.Rendering, e, func() string {
		return fmt.Sprintf("Environment **%s** is ready (Python %s, %s). Run in it with env: %q.\n\n%s",
			in.Name, e.PythonVersion, sizeText(e.SizeBytes), in.Name, envLine(e))
	}), e, nil
}

func (t *tools) envDelete(ctx context.Context, _ *mcp.CallToolRequest, in EnvDeleteInput) (*mcp.CallToolResult, executor.EnvDeleteResult, error) {
	ex, err := t.envExecutor()
	if err != nil {
		return nil, executor.EnvDeleteResult{}, err
	}
	r, err := ex.DeleteEnv(ctx, in.Name)
	if err != nil {
		return nil, executor.EnvDeleteResult{}, err
	}
	return render(in.Rendering, r, func() string {
		s := fmt.Sprintf("Deleted the name **%s**", r.Name)
		if r.Removed {
			s += fmt.Sprintf(" and its environment (%s freed)", sizeText(r.FreedBytes))
		}
		if r.Note != "" {
			s += "; " + r.Note
		}
		return s + ".\n"
	}), r, nil
}

func renderEnvList(l executor.EnvList) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d environment(s), %s in all, most recently used first.\n", len(l.Envs), sizeText(l.TotalBytes))
	for _, e := range l.Envs {
		b.WriteString("- " + envLine(e) + "\n")
	}
	return b.String()
}

func envLine(e executor.EnvInfo) string {
	var parts []string
	if len(e.Names) > 0 {
		parts = append(parts, "**"+strings.Join(e.Names, ", ")+"** (pinned)")
	}
	parts = append(parts, "`"+e.Key+"`", "Python "+e.PythonVersion)
	if e.Tool != "" {
		parts = append(parts, "tool: "+e.Tool)
	}
	switch {
	case e.ProjectDir != "":
		parts = append(parts, "project "+e.ProjectDir)
	case len(e.Resolved) > 0:
		parts = append(parts, strings.Join(e.Resolved, " "))
	case len(e.Requirements) > 0:
		parts = append(parts, strings.Join(e.Requirements, " "))
	}
	if e.Built {
		parts = append(parts, sizeText(e.SizeBytes))
		if !e.LastUsed.IsZero() {
			parts = append(parts, "last used "+e.LastUsed.UTC().Format(time.RFC3339))
		}
	} else {
		parts = append(parts, "not built (rebuilt at its next use)")
	}
	if e.InUse {
		parts = append(parts, "in use")
	}
	return strings.Join(parts, " · ")
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

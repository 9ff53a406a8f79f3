package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/present"
	"github.com/pyexec/pyexec/internal/scripts"
)

// SaveScriptInput is the input of save_script.
type SaveScriptInput struct {
	Name           string   `json:"name" jsonschema:"Name to save under: letters, digits, '_', '-' and '.', at most 64 characters (a trailing .py is dropped). No path separators."`
	Code           string   `json:"code" jsonschema:"The script's Python source."`
	Dependencies   []string `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements written into a PEP 723 header (# /// script), so the script declares what it needs wherever it runs."`
	RequiresPython string   `json:"requires_python,omitempty" jsonschema:"requires-python for the PEP 723 header, like >=3.11."`
	Overwrite      bool     `json:"overwrite,omitempty" jsonschema:"Replace an existing script of that name (default false: saving over one is an error)."`
	Rendering
}

// SaveScriptOutput is the result of save_script.
type SaveScriptOutput struct {
	scripts.Entry
}

// ListScriptsInput is the input of list_scripts.
type ListScriptsInput struct {
	IncludeAutosaved bool `json:"include_autosaved,omitempty" jsonschema:"Also list the autosaved code of recent inline runs, newest first (default false)."`
	Rendering
}

// ListScriptsOutput is the result of list_scripts.
type ListScriptsOutput struct {
	Scripts []scripts.Entry `json:"scripts" jsonschema:"Saved scripts by name, then (when asked) autosaved runs newest first."`
	Count   int             `json:"count" jsonschema:"Number of entries."`
}

// ViewScriptInput is the input of view_script.
type ViewScriptInput struct {
	Name      string `json:"name" jsonschema:"Name of the script (as list_scripts shows it)."`
	Autosaved bool   `json:"autosaved,omitempty" jsonschema:"Look among autosaved runs instead of saved scripts (default false)."`
	Rendering
}

// ViewScriptOutput is the result of view_script.
type ViewScriptOutput struct {
	scripts.Script
}

func (t *tools) registerScripts(srv *mcp.Server) {
	if t.scripts == nil {
		t.log.Warn("scripts toolset requested but no script store is configured; skipping it")
		return
	}
	addTool(t, srv, &mcp.Tool{
		Name:  "save_script",
		Title: "Save a Python script by name",
		Description: "Save Python code under a name in the server's script store, with its dependencies written as a PEP 723 header. " +
			"Run it later with run_python (script_name) or benchmark_python (script_name); see it with list_scripts and view_script.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: ptr(false)},
	}, t.saveScript)
	addTool(t, srv, &mcp.Tool{
		Name:        "list_scripts",
		Title:       "List saved scripts",
		Description: "List saved scripts (name, path, first docstring line, PEP 723 dependencies) and, with include_autosaved, the code of recent inline runs that was saved automatically.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.listScripts)
	addTool(t, srv, &mcp.Tool{
		Name:        "view_script",
		Title:       "View a saved script",
		Description: "Show a saved script's source and its JSON sidecar; with autosaved, an autosaved inline run's code and the arguments of the call that ran it.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.viewScript)
}

func (t *tools) saveScript(ctx context.Context, _ *mcp.CallToolRequest, in SaveScriptInput) (*mcp.CallToolResult, SaveScriptOutput, error) {
	e, err := t.scripts.SaveScript(ctx, scripts.SaveRequest{Name: in.Name, Code: in.Code, Dependencies: in.Dependencies, RequiresPython: in.RequiresPython, Overwrite: in.Overwrite})
	if err != nil {
		return nil, SaveScriptOutput{}, toolError(err)
	}
	out := SaveScriptOutput{Entry: e}
	return render(in.Rendering, out, func() string {
		return fmt.Sprintf("Saved **%s** (%d bytes) at `%s`.%s Run it with run_python {\"script_name\": %q}.\n",
			e.Name, e.SizeBytes, e.Path, depsNote(e), e.Name)
	}), out, nil
}

func (t *tools) listScripts(ctx context.Context, _ *mcp.CallToolRequest, in ListScriptsInput) (*mcp.CallToolResult, ListScriptsOutput, error) {
	list, err := t.scripts.ListScripts(ctx, in.IncludeAutosaved)
	if err != nil {
		return nil, ListScriptsOutput{}, toolError(err)
	}
	out := ListScriptsOutput{Scripts: list, Count: len(list)}
	return render(in.Rendering, out, func() string { return renderScriptList(list, in.IncludeAutosaved) }), out, nil
}

func (t *tools) viewScript(ctx context.Context, _ *mcp.CallToolRequest, in ViewScriptInput) (*mcp.CallToolResult, ViewScriptOutput, error) {
	sc, err := t.scripts.ViewScript(ctx, in.Name, in.Autosaved)
	if err != nil {
		return nil, ViewScriptOutput{}, toolError(err)
	}
	out := ViewScriptOutput{Script: sc}
	return render(in.Rendering, out, func() string { return renderScript(sc) }), out, nil
}

// resolveScriptName turns script_name into the request's code. A saved
// script runs as inline code: it lives in the state directory, outside the
// workspace that script_path is confined to. inline reports whether the
// caller sent its own inline code (which is then autosaved).
func (t *tools) resolveScriptName(ctx context.Context, req *engine.Request, scriptName string) (inline bool, err error) {
	if scriptName == "" {
		return req.Code != "", nil
	}
	if req.Code != "" || req.ScriptPath != "" {
		return false, errors.New("script_name: give one of code, script_path or script_name")
	}
	if t.scripts == nil {
		return false, errors.New("script_name: this server has no script store")
	}
	src, err := t.scripts.ScriptSource(ctx, scriptName)
	if err != nil {
		// The store names its own field ("name"); here the caller's is
		// script_name. A remote store's rejection is a RequestError.
		var fe *scripts.FieldError
		var re *engine.RequestError
		switch {
		case errors.As(err, &fe):
			return false, fmt.Errorf("script_name: %w", fe.Err)
		case errors.As(err, &re) && re.Field != "":
			return false, &engine.RequestError{Field: "script_name", Message: re.Message}
		}
		return false, toolError(err)
	}
	req.Code = src
	return false, nil
}

// autosave queues inline code with the call's other arguments (code left
// out, env_vars values redacted: the store is a plain directory). It costs
// the call a hash and a channel send.
func (t *tools) autosave(tool string, req engine.Request, jobID string) {
	if t.scripts == nil || req.Code == "" {
		return
	}
	code := req.Code
	req.Code = ""
	if len(req.EnvVars) > 0 {
		red := make(map[string]string, len(req.EnvVars))
		for k := range req.EnvVars {
			red[k] = "<redacted>"
		}
		req.EnvVars = red
	}
	t.scripts.Autosave(scripts.AutosaveRecord{Tool: tool, Code: code, Arguments: req, JobID: jobID})
}

// autosaveBatch autosaves a batch's inline entries, each with its job id
// when the batch ran as background jobs.
func (t *tools) autosaveBatch(reqs []engine.Request, out executor.BatchResult) {
	for i, r := range reqs {
		jobID := ""
		if i < len(out.Results) {
			jobID = out.Results[i].JobID
		}
		t.autosave("run_python_batch", r, jobID)
	}
}

func depsNote(e scripts.Entry) string {
	var parts []string
	if len(e.Dependencies) > 0 {
		parts = append(parts, "dependencies: "+strings.Join(e.Dependencies, ", "))
	}
	if e.RequiresPython != "" {
		parts = append(parts, "requires-python "+e.RequiresPython)
	}
	if len(parts) == 0 {
		return ""
	}
	return " PEP 723 header: " + strings.Join(parts, "; ") + "."
}

func renderScriptList(list []scripts.Entry, withAuto bool) string {
	if len(list) == 0 {
		if withAuto {
			return "No saved scripts and no autosaved runs.\n"
		}
		return "No saved scripts. Save one with save_script (include_autosaved: true also shows recent inline runs).\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d script(s):\n\n", len(list))
	for _, e := range list {
		kind := ""
		if e.Autosaved {
			kind = " (autosaved " + e.SavedAt.Format("2006-01-02 15:04:05Z") + ")"
		}
		fmt.Fprintf(&b, "- **%s**%s", e.Name, kind)
		if e.Description != "" {
			fmt.Fprintf(&b, " — %s", e.Description)
		}
		if len(e.Dependencies) > 0 {
			fmt.Fprintf(&b, " · deps: %s", strings.Join(e.Dependencies, ", "))
		}
		fmt.Fprintf(&b, " · `%s`\n", e.Path)
	}
	return b.String()
}

func renderScript(sc scripts.Script) string {
	var b strings.Builder
	kind := "saved script"
	if sc.Autosaved {
		kind = "autosaved run"
	}
	fmt.Fprintf(&b, "**%s** (%s, %d bytes) · `%s`\n", sc.Name, kind, sc.SizeBytes, sc.Path)
	fence := present.FenceFor(sc.Source)
	fmt.Fprintf(&b, "\n%spython\n%s", fence, sc.Source)
	if !strings.HasSuffix(sc.Source, "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%s\n", fence)
	if sc.Sidecar != nil {
		side, _ := json.MarshalIndent(sc.Sidecar, "", "  ")
		f := present.FenceFor(string(side))
		fmt.Fprintf(&b, "\nsidecar:\n%sjson\n%s\n%s\n", f, side, f)
	}
	return b.String()
}

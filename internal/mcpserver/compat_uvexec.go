package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
)

// uv-exec-mcp seed adapters: its MCP front end forwarded each call over HTTP
// to an execution server that ran scripts from the directory it was started
// in. pyexec's workspace is that directory; in the embedded default there is
// no HTTP hop, and the status tools say so instead of pretending.

// ExecutePythonScriptInput is the input of execute_python_script.
type ExecutePythonScriptInput struct {
	ScriptPath string   `json:"script_path" jsonschema:"Path of a .py file relative to the workspace (the execution server's working directory). Paths leaving the workspace are rejected."`
	Timeout    *float64 `json:"timeout,omitempty" jsonschema:"Timeout in seconds (default 30; capped by the server's maximum)."`
	Rendering
}

// ExecutePythonScriptOutput is the result of execute_python_script.
type ExecutePythonScriptOutput struct {
	engine.Result
	ScriptPath       string `json:"script_path" jsonschema:"The script that ran, as given."`
	WorkingDirectory string `json:"working_directory" jsonschema:"Directory the script ran in (the workspace)."`
}

// UVTestInput is the input of test_hello_world_http and test_minimal_http.
type UVTestInput struct {
	Timeout *float64 `json:"timeout,omitempty" jsonschema:"Timeout in seconds (default 30 for test_hello_world_http, 10 for test_minimal_http)."`
	Rendering
}

// CheckServerInput is the (empty) input of check_execution_server and
// get_http_server_info.
type CheckServerInput struct {
	Rendering
}

// CheckServerOutput is the result of check_execution_server.
type CheckServerOutput struct {
	Status            string  `json:"status" jsonschema:"healthy when the executor answers, unreachable otherwise."`
	Healthy           bool    `json:"healthy" jsonschema:"True when the executor answers."`
	Mode              string  `json:"mode" jsonschema:"embedded (Python runs inside this MCP server's process; there is no separate execution server) or remote (a pyexec execution server over HTTP)."`
	ServerURL         string  `json:"server_url,omitempty" jsonschema:"URL of the remote execution server (remote mode only)."`
	Version           string  `json:"version,omitempty" jsonschema:"pyexec version of the executor."`
	WorkingDirectory  string  `json:"working_directory,omitempty" jsonschema:"Directory scripts are resolved against and confined to (the workspace)."`
	MaxTimeoutSeconds float64 `json:"max_timeout_seconds,omitempty" jsonschema:"Largest timeout a run can get."`
	DefaultPython     string  `json:"default_python,omitempty" jsonschema:"Version of the default interpreter."`
	Message           string  `json:"message" jsonschema:"What was checked, in words."`
}

// ServerInfoCompatOutput is the result of get_http_server_info.
type ServerInfoCompatOutput struct {
	Architecture     string   `json:"architecture" jsonschema:"How this server is put together."`
	Mode             string   `json:"mode" jsonschema:"embedded or remote."`
	ServerURL        string   `json:"server_url,omitempty" jsonschema:"URL of the remote execution server (remote mode only)."`
	Transport        string   `json:"transport" jsonschema:"How MCP calls reach the Python runs."`
	Version          string   `json:"version" jsonschema:"pyexec version."`
	WorkingDirectory string   `json:"working_directory" jsonschema:"The workspace: scripts are resolved against it and confined to it."`
	StateDir         string   `json:"state_dir" jsonschema:"Where pyexec keeps its state."`
	DefaultPython    string   `json:"default_python" jsonschema:"Version and path of the default interpreter."`
	UV               string   `json:"uv" jsonschema:"uv version, or not installed."`
	DefaultTimeout   float64  `json:"default_timeout_seconds" jsonschema:"Timeout of runs that give none."`
	MaxTimeout       float64  `json:"max_timeout_seconds" jsonschema:"Largest timeout a run can get."`
	Security         []string `json:"security" jsonschema:"Protections every run gets."`
}

func (t *tools) registerUVExecCompat(srv *mcp.Server) {
	addTool(t, srv, &mcp.Tool{
		Name:        "execute_python_script",
		Title:       "Execute a Python script (uv-exec-mcp compatible)",
		Description: "Run a .py file from the workspace (the execution server's working directory) with a timeout, and return its output. Same as run_python with script_path.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.executePythonScript)
	addTool(t, srv, &mcp.Tool{
		Name:        "check_execution_server",
		Title:       "Check the execution server (uv-exec-mcp compatible)",
		Description: "Check that the executor behind this MCP server is up. In the embedded default the executor is this process itself; with a remote executor it is the execution server at its URL.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.checkExecutionServer)
	addTool(t, srv, &mcp.Tool{
		Name:         "test_hello_world_http",
		Title:        "Run the built-in hello-world test (uv-exec-mcp compatible)",
		Description:  "Run a built-in hello-world script through the executor to verify the whole path end to end.",
		Annotations:  &mcp.ToolAnnotations{OpenWorldHint: ptr(false)},
		OutputSchema: runPythonOutputSchema(),
	}, t.testHelloWorld)
	addTool(t, srv, &mcp.Tool{
		Name:         "test_minimal_http",
		Title:        "Run the built-in minimal test (uv-exec-mcp compatible)",
		Description:  "Run the smallest possible script through the executor (a quick liveness test).",
		Annotations:  &mcp.ToolAnnotations{OpenWorldHint: ptr(false)},
		OutputSchema: runPythonOutputSchema(),
	}, t.testMinimal)
	addTool(t, srv, &mcp.Tool{
		Name:        "get_http_server_info",
		Title:       "Describe the server architecture (uv-exec-mcp compatible)",
		Description: "Describe how this MCP server runs Python: embedded (in-process) or through a remote pyexec execution server, the working directory, limits and protections.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.getHTTPServerInfo)
}

func (t *tools) executePythonScript(ctx context.Context, req *mcp.CallToolRequest, in ExecutePythonScriptInput) (*mcp.CallToolResult, ExecutePythonScriptOutput, error) {
	r := engine.Request{ScriptPath: in.ScriptPath, Timeout: 30}
	if in.Timeout != nil {
		r.Timeout = *in.Timeout
	}
	res, err := t.ex.Run(ctx, r, progressTo(ctx, req))
	if err != nil {
		return nil, ExecutePythonScriptOutput{}, toolError(err)
	}
	out := ExecutePythonScriptOutput{Result: res, ScriptPath: in.ScriptPath}
	if info, err := t.ex.Info(ctx); err == nil {
		out.WorkingDirectory = info.Workspace
	}
	return render(in.Rendering, out, func() string {
		return fmt.Sprintf("`%s` in `%s`\n\n%s", in.ScriptPath, out.WorkingDirectory, renderResult(res))
	}), out, nil
}

// helloWorldScript is the built-in end-to-end test: it proves the
// interpreter starts, prints, and sees its environment.
const helloWorldScript = `import platform, sys
print("Hello World from pyexec!")
print("Python", platform.python_version(), "at", sys.executable)
`

func (t *tools) testHelloWorld(ctx context.Context, req *mcp.CallToolRequest, in UVTestInput) (*mcp.CallToolResult, RunPythonOutput, error) {
	return t.builtinTest(ctx, req, in, helloWorldScript, 30)
}

func (t *tools) testMinimal(ctx context.Context, req *mcp.CallToolRequest, in UVTestInput) (*mcp.CallToolResult, RunPythonOutput, error) {
	return t.builtinTest(ctx, req, in, `print("minimal test OK")`+"\n", 10)
}

func (t *tools) builtinTest(ctx context.Context, req *mcp.CallToolRequest, in UVTestInput, code string, timeout float64) (*mcp.CallToolResult, RunPythonOutput, error) {
	if in.Timeout != nil {
		timeout = *in.Timeout
	}
	res, err := t.ex.Run(ctx, engine.Request{Code: code, Timeout: timeout}, progressTo(ctx, req))
	if err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	out := RunPythonOutput{Result: res}
	return render(in.Rendering, out, func() string { return renderResult(res) }), out, nil
}

func (t *tools) checkExecutionServer(ctx context.Context, _ *mcp.CallToolRequest, in CheckServerInput) (*mcp.CallToolResult, CheckServerOutput, error) {
	m := t.mode()
	out := CheckServerOutput{Mode: m.Mode, ServerURL: m.URL}
	info, err := t.ex.Info(ctx)
	if err != nil {
		out.Status = "unreachable"
		out.Message = fmt.Sprintf("the executor did not answer: %v", err)
	} else {
		out.Status, out.Healthy = "healthy", true
		out.Version, out.WorkingDirectory = info.Version, info.Workspace
		out.MaxTimeoutSeconds, out.DefaultPython = info.Limits.MaxTimeoutSeconds, info.DefaultInterpreter.Version
		if m.Mode == "embedded" {
			out.Message = "embedded mode: there is no separate execution server; Python runs from this MCP server's process, which answered"
		} else {
			out.Message = "the remote execution server answered"
		}
	}
	return render(in.Rendering, out, func() string {
		s := fmt.Sprintf("**%s** · %s mode", out.Status, out.Mode)
		if out.ServerURL != "" {
			s += " · " + out.ServerURL
		}
		s += "\n\n" + out.Message + "\n"
		if out.Healthy {
			s += fmt.Sprintf("\n- pyexec %s\n- working directory: `%s`\n- default Python %s\n- max timeout %gs\n", out.Version, out.WorkingDirectory, out.DefaultPython, out.MaxTimeoutSeconds)
		}
		return s
	}), out, nil
}

func (t *tools) getHTTPServerInfo(ctx context.Context, _ *mcp.CallToolRequest, in CheckServerInput) (*mcp.CallToolResult, ServerInfoCompatOutput, error) {
	info, err := t.ex.Info(ctx)
	if err != nil {
		return nil, ServerInfoCompatOutput{}, toolError(err)
	}
	m := t.mode()
	out := ServerInfoCompatOutput{
		Mode: m.Mode, ServerURL: m.URL, Version: info.Version,
		WorkingDirectory: info.Workspace, StateDir: info.StateDir,
		DefaultPython:  fmt.Sprintf("%s (%s)", info.DefaultInterpreter.Version, info.DefaultInterpreter.Path),
		UV:             info.UV,
		DefaultTimeout: info.Limits.DefaultTimeoutSeconds, MaxTimeout: info.Limits.MaxTimeoutSeconds,
		Security: []string{
			"no shell: code is written to a file and run as python -u FILE ARGS",
			"scripts, cwd and env files must resolve (after symlinks) inside the working directory",
			"only .py files run as scripts",
			"every run has a timeout that kills its whole process tree (a per-run subreaper launcher)",
			"a minimal environment unless the server runs with --inherit-env (the server's variables are not passed on)",
			"output returned inline is capped (head and tail kept)",
		},
	}
	if m.Mode == "embedded" {
		out.Architecture = "one process: the MCP server runs Python itself through its engine (no execution server, no HTTP hop). " +
			"For the two-server layout, run `pyexec serve` where the scripts are and point `pyexec mcp --executor URL` at it."
		out.Transport = "in-process"
	} else {
		out.Architecture = "two servers: this MCP front end forwards each run over HTTP to a pyexec execution server, which runs Python in its working directory"
		out.Transport = "HTTP"
	}
	return render(in.Rendering, out, func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "**pyexec %s** · %s mode (%s)\n\n%s\n\n", out.Version, out.Mode, out.Transport, out.Architecture)
		if out.ServerURL != "" {
			fmt.Fprintf(&b, "- execution server: %s\n", out.ServerURL)
		}
		fmt.Fprintf(&b, "- working directory: `%s`\n- default Python: %s\n- uv: %s\n- timeout: %gs default, %gs max\n\nSecurity:\n", out.WorkingDirectory, out.DefaultPython, out.UV, out.DefaultTimeout, out.MaxTimeout)
		for _, s := range out.Security {
			fmt.Fprintf(&b, "- %s\n", s)
		}
		return b.String()
	}), out, nil
}

// Package engine is the only code in pyexec that starts Python. Every front end
// (MCP, REST, CLI) builds a Request, hands it to an Engine (usually through an
// executor) and renders the Result it gets back.
package engine

import "github.com/pyexec/pyexec/internal/sandbox"

// Request describes one Python run. The same struct is the wire format of the
// MCP tools and the REST API, so its field names follow the seeds' names and
// every field carries a description for the generated JSON schema.
type Request struct {
	Code       string   `json:"code,omitempty" jsonschema:"Inline Python source to run (at most 1 MiB). Exactly one of code or script_path must be given."`
	ScriptPath string   `json:"script_path,omitempty" jsonschema:"Path of an existing .py file inside the workspace, relative to cwd (default: the workspace root) or absolute. Exactly one of code or script_path must be given."`
	Args       []string `json:"args,omitempty" jsonschema:"Command-line arguments passed to the script as sys.argv[1:]."`
	Stdin      string   `json:"stdin,omitempty" jsonschema:"Text fed to the script's standard input. Without it stdin is empty (/dev/null)."`
	Cwd        string   `json:"cwd,omitempty" jsonschema:"Working directory of the run, inside the workspace (relative to it or absolute). Default: the workspace root. A .venv/bin/python found here is used when no interpreter is requested."`

	Python        string `json:"python,omitempty" jsonschema:"Path of the Python interpreter to use. Overrides python_version and .venv detection."`
	PythonVersion string `json:"python_version,omitempty" jsonschema:"Python version to use, like 3.12 or 3.11.7, chosen among the interpreters installed on the server (never downloaded)."`

	EnvVars map[string]string `json:"env_vars,omitempty" jsonschema:"Environment variables for the run. They override env_file and the base environment."`
	EnvFile string            `json:"env_file,omitempty" jsonschema:"Path of a .env file inside the workspace (python-dotenv format: comments, quotes, multi-line values, ${VAR} expansion) loaded before env_vars."`

	Dependencies []string `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements to install, like [\"requests>=2\", \"numpy\"]. Added to the script's PEP 723 metadata. Resolved once with uv into a cached environment; later runs with the same list start as fast as runs without."`

	NoProject bool `json:"no_project,omitempty" jsonschema:"Do not run in the environment of a pyproject.toml project around the script (or cwd); dependencies and a PEP 723 block still apply."`

	Env string `json:"env,omitempty" jsonschema:"Name of a named environment (env_create; env_list shows them) to run in: its interpreter and packages are used, and the script's PEP 723 block and any project around it are not. Cannot be combined with dependencies, python or python_version."`

	Timeout float64 `json:"timeout,omitempty" jsonschema:"Hard time limit in seconds; on timeout the whole process tree is killed and partial output is kept. Without it: 30 s for batch entries and plain runs (capped by the server maximum, default 600 s); run_python calls, which can continue as background jobs, are limited by the job timeout (default 3600 s), which also caps this value."`

	Sandbox string          `json:"sandbox,omitempty" jsonschema:"Confinement for this run: workspace (writes only in the workspace and a private temp dir) or strict (also no network and reads limited to Python and the workspace). May only tighten the server's policy."`
	Network string          `json:"network,omitempty" jsonschema:"deny to run without network access. May only tighten the server's setting."`
	Limits  *sandbox.Limits `json:"limits,omitempty" jsonschema:"Resource limits for this run; each may only be lower than the server's."`

	// Preamble is inserted between `python -u` and the script file: a
	// wrapper script and its arguments (the benchmark's profiler, see
	// Engine.CodeFile), so argv is python -u WRAPPER ARGS... FILE ARGS... and
	// keeps the plain shape (a script file first) that every start path,
	// cold or warm, runs the same way; absolute paths in it stay readable
	// under the sandbox. Set only by trusted server code, never from the
	// wire (json:"-").
	Preamble []string `json:"-"`
}

// Result is what a finished (or killed) run produced. Output fields are capped
// inline; the byte counts always tell the full size.
type Result struct {
	Stdout   string `json:"stdout" jsonschema:"Standard output (UTF-8; invalid bytes replaced). Head and tail are kept when it exceeds the inline cap."`
	Stderr   string `json:"stderr" jsonschema:"Standard error (UTF-8; invalid bytes replaced). Ends with a [TIMEOUT] line when the run timed out."`
	ExitCode int    `json:"exit_code" jsonschema:"Exit status of the script; negative signal number when it was killed by a signal (as Python's subprocess reports it)."`
	Success  bool   `json:"success" jsonschema:"True when the script exited with status 0 and did not time out."`
	TimedOut bool   `json:"timed_out" jsonschema:"True when the run was killed because it exceeded its timeout."`

	ElapsedSeconds    float64 `json:"elapsed_seconds" jsonschema:"Wall-clock time of the run in seconds."`
	ExecutionStrategy string  `json:"execution_strategy" jsonschema:"How the interpreter was chosen: system-python, venv (a .venv or explicit virtualenv), uv-env or uv-project."`
	PythonVersionUsed string  `json:"python_version_used" jsonschema:"Version of the interpreter that ran the code, like 3.11.7."`
	Executable        string  `json:"executable" jsonschema:"Path of the interpreter that ran the code."`

	CPUUserSeconds   float64 `json:"cpu_user_seconds" jsonschema:"User CPU time of the whole process tree (kernel rusage of the finished run)."`
	CPUSystemSeconds float64 `json:"cpu_system_seconds" jsonschema:"System CPU time of the whole process tree (kernel rusage of the finished run)."`
	PeakRSSBytes     int64   `json:"peak_rss_bytes" jsonschema:"Largest resident set size reached by any one process of the run, from the kernel's rusage (exact, not sampled)."`
	PeakMemoryBytes  int64   `json:"peak_memory_bytes,omitempty" jsonschema:"High-water mark of the run's cgroup: all its processes together, as the kernel charged them (page cache the run caused included). Absent when the run had no cgroup."`

	ResolvedDependencies []string `json:"resolved_dependencies,omitempty" jsonschema:"Exact versions (name==version) installed in the uv environment the run used; absent when it used none."`

	LimitExceeded string   `json:"limit_exceeded,omitempty" jsonschema:"Which resource limit the run hit, when it hit one: memory, cpu, processes or file_size (derived from kernel evidence, not guessed from the exit code)."`
	Sandbox       string   `json:"sandbox,omitempty" jsonschema:"Confinement the run had: policy, network and the user it ran as."`
	SandboxNotes  []string `json:"sandbox_notes,omitempty" jsonschema:"What the sandbox could not enforce on this machine (best-effort mode) or downgraded, e.g. running as root without capabilities because the run-as user cannot write the workspace."`

	StdoutBytes     int64 `json:"stdout_bytes" jsonschema:"Total number of bytes the script wrote to stdout, including any not returned inline."`
	StderrBytes     int64 `json:"stderr_bytes" jsonschema:"Total number of bytes the script wrote to stderr, including any not returned inline."`
	StdoutTruncated bool  `json:"stdout_truncated" jsonschema:"True when stdout exceeded the inline cap and its middle was dropped."`
	StderrTruncated bool  `json:"stderr_truncated" jsonschema:"True when stderr exceeded the inline cap and its middle was dropped."`
	StdoutLines     int64 `json:"stdout_lines,omitempty" jsonschema:"Lines (newlines) the script wrote to stdout, including any not returned."`
	StderrLines     int64 `json:"stderr_lines,omitempty" jsonschema:"Lines (newlines) the script wrote to stderr, including any not returned."`

	// OutputJobID is set by executors with jobs, not the engine.
	OutputJobID string `json:"output_job_id,omitempty" jsonschema:"The background job that keeps this run's full output, when the output was too long to return whole: read job://ID/output or get_job with offsets."`

	// What the run showed besides its streams (outputs.go).
	RunOutputs
}

// Stream names one of the two output streams of a run.
type Stream int

const (
	Stdout Stream = iota + 1
	Stderr
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "unknown"
}

// Observer receives a run's life as it happens. Jobs spool output through it,
// the CLI streams to the terminal, MCP handlers derive progress from it.
// Methods are called from the engine's reader goroutines; they must not block
// for long, and Output must not retain p after returning.
type Observer interface {
	Started(pid int)
	Output(s Stream, p []byte)
}

// RedactEnv returns a copy of env whose values are replaced (nil for
// none): what stores keep of a request's env_vars, whose values are often
// credentials.
func RedactEnv(env map[string]string) map[string]string {
	if len(env) == 0 {
		return env
	}
	m := make(map[string]string, len(env))
	for k := range env {
		m[k] = "[redacted]"
	}
	return m
}

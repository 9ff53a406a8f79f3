// Package session keeps live Python sessions: one confined interpreter per
// session holding a namespace across calls (the engine starts it, warm when
// it can; see engine.StartSession). It owns the registry, the lifecycle
// (idle timeout, maximum lifetime, the cap on sessions), one cell at a time
// per session, interrupts, and the rule that a session is never lost
// silently: one that died says why, on its next call and in the list.
package session

import (
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Settings are what a session is created with. A later call naming the
// session must not ask for different ones.
type Settings struct {
	Python        string            `json:"python,omitempty" jsonschema:"Path of the Python interpreter of the session."`
	Env           string            `json:"env,omitempty" jsonschema:"Name of a named environment (env_create) the session runs in: its interpreter and packages. Cannot be combined with dependencies, python or python_version at creation; dependencies of later calls go into the session's own overlay on top of it."`
	PythonVersion string            `json:"python_version,omitempty" jsonschema:"Python version of the session, like 3.12, among the interpreters installed on the server."`
	Dependencies  []string          `json:"dependencies,omitempty" jsonschema:"PEP 508 requirements. At creation the session starts in their cached environment; on a later call, those it lacks are installed (with uv, confined) into the session's own package overlay and the cell imports them at once, no restart."`
	Cwd           string            `json:"cwd,omitempty" jsonschema:"Working directory of the session, inside the workspace. Default: the workspace root."`
	EnvVars       map[string]string `json:"env_vars,omitempty" jsonschema:"Environment variables of the session."`
	EnvFile       string            `json:"env_file,omitempty" jsonschema:"Path of a .env file inside the workspace, loaded before env_vars."`
	Sandbox       string            `json:"sandbox,omitempty" jsonschema:"Confinement of the session: workspace or strict. May only tighten the server's policy."`
	Network       string            `json:"network,omitempty" jsonschema:"deny to run the session without network access."`
	Limits        *sandbox.Limits   `json:"limits,omitempty" jsonschema:"Resource limits of the whole session (all its processes together for memory and processes)."`
}

// FromRequest takes the creation settings out of a run request.
func FromRequest(r engine.Request) Settings {
	return Settings{Python: r.Python, Env: r.Env, PythonVersion: r.PythonVersion, Dependencies: r.Dependencies, Cwd: r.Cwd,
		EnvVars: r.EnvVars, EnvFile: r.EnvFile, Sandbox: r.Sandbox, Network: r.Network, Limits: r.Limits}
}

func (s Settings) request() engine.Request {
	return engine.Request{Python: s.Python, Env: s.Env, PythonVersion: s.PythonVersion, Dependencies: s.Dependencies, Cwd: s.Cwd,
		EnvVars: s.EnvVars, EnvFile: s.EnvFile, Sandbox: s.Sandbox, Network: s.Network, Limits: s.Limits}
}

// CreateRequest creates a session.
type CreateRequest struct {
	Session string `json:"session" jsonschema:"Name of the new session: 1-64 characters of A-Z a-z 0-9 _ . -"`
	Settings
	IdleTimeout float64 `json:"idle_timeout,omitempty" jsonschema:"Seconds without a call after which the session is closed. Default: the server's (30 minutes); at most its maximum lifetime."`
	Label       string  `json:"label,omitempty" jsonschema:"A note for people and models listing sessions (at most 200 characters)."`
}

// RunRequest runs one cell. Settings apply when the call creates the
// session; on an existing one they must match (empty fields are ignored).
type RunRequest struct {
	Session string  `json:"session"`
	Code    string  `json:"code"`
	Timeout float64 `json:"timeout,omitempty"`
	// SyncBudget, when > 0 and the server has jobs, is how long the call
	// waits for the cell (seconds) before the cell continues as a job and
	// the call returns the output so far and the job id.
	SyncBudget float64 `json:"sync_budget,omitempty"`
	// Async starts the cell as a job and returns at once.
	Async bool `json:"async,omitempty"`
	// OnJob, when set (in process only: an MCP task), makes the cell a
	// job that is kept and never handed off, and hears its id.
	OnJob func(jobID string) `json:"-"`
	// JobTimeout, when > 0, is the limit of a job-backed cell instead of
	// Timeout's default and the server's maximum: the job's own limit
	// (the request's timeout when shorter than --job-timeout, else
	// --job-timeout), exactly as for a run_python run that is a job.
	JobTimeout time.Duration `json:"-"`
	// OutputBudget is the characters of output the caller will show (see
	// package present): a job-backed cell that finishes with more, or with
	// images that cannot all go inline, keeps its job (OutputJobID), so its
	// full output and its images stay readable. 0: present's default.
	OutputBudget int `json:"output_budget,omitempty"`
	Settings
}

// Status values of a session.
const (
	StatusIdle   = "idle"   // ready for a cell
	StatusBusy   = "busy"   // running a cell
	StatusLost   = "lost"   // its interpreter ended without being closed (see LostReason)
	StatusClosed = "closed" // closed on request or by its idle timeout
)

// Info describes a session (session_list, session://{name}).
type Info struct {
	Name           string    `json:"session" jsonschema:"The session's name."`
	Label          string    `json:"label,omitempty" jsonschema:"The label it was created with."`
	Status         string    `json:"status" jsonschema:"idle, busy (running a cell), lost (its interpreter ended; lost_reason says why) or closed."`
	LostReason     string    `json:"lost_reason,omitempty" jsonschema:"Why a lost session ended: timeout, interrupt_failed, memory, processes, cpu, file_size, killed, crashed, exited, max_lifetime, server_restarted or node_lost (the replica holding it stopped heartbeating)."`
	LostDetail     string    `json:"lost_detail,omitempty" jsonschema:"What happened, in words."`
	Settings       Settings  `json:"settings" jsonschema:"What it was created with."`
	Node           string    `json:"node,omitempty" jsonschema:"The replica holding the session, when servers share a PostgreSQL store; any replica answers for it."`
	Installed      []string  `json:"installed,omitempty" jsonschema:"Requirements installed into its package overlay after creation (dependencies of later calls)."`
	Python         string    `json:"python_version_used,omitempty" jsonschema:"Version of its interpreter."`
	ExecutionCount int       `json:"execution_count" jsonschema:"Cells run so far."`
	CreatedAt      time.Time `json:"created_at" jsonschema:"When it was created."`
	LastUsedAt     time.Time `json:"last_used_at" jsonschema:"When its last call ended."`
	ExpiresAt      time.Time `json:"expires_at,omitempty" jsonschema:"When it will be closed unless used (idle timeout, or its maximum lifetime if sooner)."`
	IdleSeconds    float64   `json:"idle_seconds" jsonschema:"Seconds since its last call ended (0 while busy)."`
	RunningCell    int       `json:"running_cell,omitempty" jsonschema:"While busy: the number of the running cell."`
	RunningSeconds float64   `json:"running_seconds,omitempty" jsonschema:"While busy: how long the running cell has run."`
	RunningJob     string    `json:"running_job_id,omitempty" jsonschema:"While busy with a cell that became a background job: its job id (get_job)."`
	StartSeconds   float64   `json:"start_seconds" jsonschema:"How long creating its interpreter took."`
	MemoryBytes    int64     `json:"memory_bytes,omitempty" jsonschema:"Resident memory of its interpreter now."`
	PeakMemory     int64     `json:"peak_memory_bytes,omitempty" jsonschema:"Peak memory: of its interpreter while it lives; of its whole cgroup once it ended."`
	CPUSeconds     float64   `json:"cpu_seconds,omitempty" jsonschema:"Once ended: CPU time of its whole process tree."`
}

// CellResult is one cell's outcome, with the session's state after it.
type CellResult struct {
	engine.CellResult
	Session        string    `json:"session" jsonschema:"The session the cell ran in."`
	ExecutionCount int       `json:"execution_count" jsonschema:"The number of this cell in the session (1 for the first)."`
	SessionCreated bool      `json:"session_created" jsonschema:"True when this call created the session."`
	Status         string    `json:"status" jsonschema:"The session's status after the cell: idle, lost or closed (sys.exit)."`
	LostReason     string    `json:"lost_reason,omitempty" jsonschema:"When the cell cost the session: why (timeout, interrupt_failed, memory, ...)."`
	LostDetail     string    `json:"lost_detail,omitempty" jsonschema:"When the cell cost the session: what happened, in words."`
	ExpiresAt      time.Time `json:"expires_at,omitempty" jsonschema:"When the session will be closed unless used again."`
	Python         string    `json:"python_version_used,omitempty" jsonschema:"Version of the session's interpreter."`
	Installed      []string  `json:"installed,omitempty" jsonschema:"Requirements this call installed into the session's own package overlay before the cell ran."`
	// Set when the cell continues as a background job (Status busy): its
	// id, and the output so far is in Stdout/Stderr.
	JobID            string `json:"job_id,omitempty"`
	JobStatus        string `json:"job_status,omitempty"`
	NextStdoutOffset int64  `json:"next_stdout_offset,omitempty"`
	NextStderrOffset int64  `json:"next_stderr_offset,omitempty"`
	// OutputJobID names the kept job of a finished cell whose output or
	// images did not fit the caller's budget: job://ID/output and
	// job://ID/artifacts/NAME read them.
	OutputJobID string `json:"output_job_id,omitempty" jsonschema:"Set when the cell's full output or its images are kept as a job: read job://ID/output and job://ID/artifacts/NAME."`
}

// HistoryCell is one cell as the history keeps it (streams cut to
// historyOutput bytes each; displays bounded as outputs.go says).
type HistoryCell struct {
	ExecutionCount int               `json:"execution_count"`
	Code           string            `json:"code"`
	Stdout         string            `json:"stdout,omitempty"`
	Stderr         string            `json:"stderr,omitempty"`
	Result         *string           `json:"result,omitempty"`
	Error          *engine.CellError `json:"error,omitempty"`
	StartedAt      time.Time         `json:"started_at"`
	ElapsedSeconds float64           `json:"elapsed_seconds"`
	// Display is what the cell displayed (figures, display(), the value's
	// rich form), bounded: OutputsNote says what was dropped.
	Display     []engine.Display    `json:"display,omitempty"`
	Files       []engine.FileChange `json:"files,omitempty"`
	OutputsNote string              `json:"outputs_note,omitempty"`
}

// History is a session's cells, oldest first.
type History struct {
	Session string        `json:"session"`
	Cells   []HistoryCell `json:"cells"`
	Dropped int           `json:"dropped,omitempty" jsonschema:"Older cells no longer kept."`
}

// Package launcher is the small helper process that stands between the server
// and Python for every run.
//
// Why a helper: a timeout must kill every process a run started, including a
// grandchild that called setsid() and left the run's process group. The
// server cannot be a child subreaper itself without racing os/exec for exit
// statuses, so each run gets its own: the server re-executes its own binary
// (`pyexec __launch`), the launcher marks itself PR_SET_CHILD_SUBREAPER,
// starts Python, and reaps with wait4(-1). Orphans of the run are reparented
// to the launcher, never to init, so when Python exits (or on SIGTERM from the
// server) the launcher can find every remaining descendant through
// /proc/<pid>/task/<tid>/children and kill it before it exits itself. It is also
// the one place where confinement is applied between fork and exec of Python
// without touching the server, and where the kernel's rusage of the finished
// process tree is collected.
package launcher

import (
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Command is the argv[1] that makes a pyexec binary (or a test binary whose
// TestMain calls MaybeRun) act as the launcher.
const Command = "__pyexec_launch"

// Spec is what the server sends the launcher on fd 3.
type Spec struct {
	Argv  []string      `json:"argv"`
	Env   []string      `json:"env"`
	Dir   string        `json:"dir"`
	Grace time.Duration `json:"grace"`
	// ExtraFiles is how many files the server passed after the side
	// channels (fd 5, 6, ...); Python inherits them as fd 3, 4, ...
	ExtraFiles int `json:"extra_files,omitempty"`
	// Sandbox, when set, confines Python (see package sandbox): applied
	// here, between reading the spec and starting Python, never in the
	// server.
	Sandbox *sandbox.Spec `json:"sandbox,omitempty"`
}

// Event is one line the launcher writes on fd 4: "started" once Python runs,
// "exit" when the run's tree is gone, or "error" when Python could not start.
type Event struct {
	Kind     string `json:"kind"`
	PID      int    `json:"pid,omitempty"`
	ExitCode int    `json:"exit_code"`
	Signal   int    `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`

	// Rusage of the whole finished tree (RUSAGE_CHILDREN of the launcher):
	// CPU is summed, MaxRSS is the largest resident set of any one process.
	UserSeconds   float64 `json:"user_seconds,omitempty"`
	SystemSeconds float64 `json:"system_seconds,omitempty"`
	MaxRSSBytes   int64   `json:"max_rss_bytes,omitempty"`

	// Sandbox reports what confinement did: limit hit, peak memory of the
	// run's cgroup, mechanisms applied and skipped.
	Sandbox *sandbox.Report `json:"sandbox,omitempty"`
}

const (
	EventStarted = "started"
	EventExit    = "exit"
	EventError   = "error"
)

// File descriptors of the launcher's side channels.
const (
	specFD   = 3
	statusFD = 4
	extraFD  = 5 // first of Spec.ExtraFiles
)

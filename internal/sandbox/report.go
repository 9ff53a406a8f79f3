package sandbox

import "strings"

// Limit names reported in Report.LimitExceeded.
const (
	LimitMemory    = "memory"
	LimitCPU       = "cpu"
	LimitProcesses = "processes"
	LimitFileSize  = "file_size"
)

// Report is what the sandbox tells about a finished run. The launcher puts
// it in its status; the engine copies LimitExceeded, PeakMemoryBytes and
// Notes into the Result.
type Report struct {
	// LimitExceeded names the limit the run hit ("memory", "cpu",
	// "processes", "file_size"), derived from evidence (cgroup OOM kills,
	// pids.max rejections, SIGXCPU, SIGXFSZ). Empty when none.
	LimitExceeded string `json:"limit_exceeded,omitempty"`
	// PeakMemoryBytes is the cgroup's peak memory (all processes), 0 when
	// there was no cgroup.
	PeakMemoryBytes int64 `json:"peak_memory_bytes,omitempty"`
	PeakProcs       int64 `json:"peak_procs,omitempty"`
	// Applied lists the mechanisms in force for the run.
	Applied []string `json:"applied,omitempty"`
	// Skipped lists what the policy wanted but this kernel could not do
	// (only ever non-empty with BestEffort, or for optional mechanisms).
	Skipped []string `json:"skipped,omitempty"`
	// MemoryViaRlimit is true when memory was capped with RLIMIT_AS
	// (no cgroup): then a MemoryError in stderr means the cap was hit.
	MemoryViaRlimit bool `json:"memory_via_rlimit,omitempty"`
	// CleanupError is set when the run's cgroup could not be removed.
	CleanupError string `json:"cleanup_error,omitempty"`
	// PrivateShm is true when the run got its own /dev/shm (a tmpfs in its
	// mount namespace).
	PrivateShm bool `json:"private_shm,omitempty"`
	// PrivateProc is true when the run got its own PID namespace with a
	// /proc of its own (a warm interpreter: one its runs share, one run at
	// a time).
	PrivateProc bool `json:"private_proc,omitempty"`
}

// LimitFromStderr refines the report with evidence only the output shows:
// CPython ignores SIGXFSZ (it gets EFBIG instead), a RLIMIT_AS cap surfaces
// as MemoryError, and RLIMIT_NPROC as EAGAIN from fork. Pass the tail of
// the run's stderr. It returns rep.LimitExceeded when that is already set.
// The limits it names are the run's own: nothing outside a run can change
// them (no other process can reach it, or the warm interpreter it was
// forked from; see pidns_linux.go and warm_linux.go).
func LimitFromStderr(rep Report, stderrTail string, exitCode int) string {
	if rep.LimitExceeded != "" || exitCode == 0 {
		return rep.LimitExceeded
	}
	switch {
	case strings.Contains(stderrTail, "[Errno 27] File too large"):
		return LimitFileSize
	case rep.MemoryViaRlimit && strings.Contains(stderrTail, "MemoryError"):
		return LimitMemory
	case strings.Contains(stderrTail, "BlockingIOError: [Errno 11] Resource temporarily unavailable"):
		return LimitProcesses
	}
	return ""
}

// Notes is a one-line summary for results: the policy and what was skipped.
func (rep Report) Notes() string {
	if len(rep.Skipped) == 0 {
		return ""
	}
	return "not enforced on this machine: " + strings.Join(rep.Skipped, "; ")
}

package ui

import (
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// DefaultRunLogSize is how many synchronous runs the audit page remembers.
const DefaultRunLogSize = 500

// maxCodeShown bounds the code kept per run: the page shows what ran, not an
// archive (autosaved scripts keep the full code).
const maxCodeShown = 4 << 10

// RunRecord is one synchronous run as the audit page shows it. Background
// jobs are not recorded here: the job store already holds them.
type RunRecord struct {
	ID         uint64    `json:"id"`
	Source     string    `json:"source"` // front end: rest, mcp, execute, batch
	StartedAt  time.Time `json:"started_at"`
	Code       string    `json:"code,omitempty"`
	ScriptPath string    `json:"script_path,omitempty"`
	CodeCut    bool      `json:"code_truncated,omitempty"`
	Status     string    `json:"status"` // completed, failed, rejected
	ExitCode   *int      `json:"exit_code,omitempty"`
	TimedOut   bool      `json:"timed_out,omitempty"`
	Error      string    `json:"error,omitempty"` // why a request was rejected
	Elapsed    float64   `json:"elapsed_seconds"`
	PeakMemory int64     `json:"peak_memory_bytes,omitempty"`
	PeakRSS    int64     `json:"peak_rss_bytes,omitempty"`
	Sandbox    string    `json:"sandbox,omitempty"`
	Limit      string    `json:"limit_exceeded,omitempty"`
	Strategy   string    `json:"execution_strategy,omitempty"`
	Python     string    `json:"python_version_used,omitempty"`
}

// RunLog remembers the most recent synchronous runs in memory, newest last.
// It is deliberately not persistent: jobs are (in the job store), and a sync
// run's full code is autosaved; this is what an operator looks at now.
type RunLog struct {
	mu   sync.Mutex
	size int
	next uint64
	ring []RunRecord
}

// NewRunLog keeps up to size runs (DefaultRunLogSize when size <= 0).
func NewRunLog(size int) *RunLog {
	if size <= 0 {
		size = DefaultRunLogSize
	}
	return &RunLog{size: size}
}

// Add records a finished (or rejected) run. It is safe to call on a nil
// RunLog, which records nothing.
func (l *RunLog) Add(source string, started time.Time, req engine.Request, res engine.Result, err error) {
	if l == nil {
		return
	}
	r := RunRecord{Source: source, StartedAt: started.UTC(), ScriptPath: req.ScriptPath}
	if len(req.Code) > maxCodeShown {
		r.Code, r.CodeCut = req.Code[:maxCodeShown], true
	} else {
		r.Code = req.Code
	}
	switch {
	case err != nil:
		r.Status, r.Error = "rejected", err.Error()
		r.Elapsed = time.Since(started).Seconds()
	default:
		code := res.ExitCode
		r.ExitCode = &code
		r.Status = "completed"
		if !res.Success {
			r.Status = "failed"
		}
		r.TimedOut = res.TimedOut
		r.Elapsed = res.ElapsedSeconds
		r.PeakMemory, r.PeakRSS = res.PeakMemoryBytes, res.PeakRSSBytes
		r.Sandbox, r.Limit = res.Sandbox, res.LimitExceeded
		r.Strategy, r.Python = res.ExecutionStrategy, res.PythonVersionUsed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	r.ID = l.next
	if len(l.ring) == l.size {
		copy(l.ring, l.ring[1:])
		l.ring = l.ring[:l.size-1]
	}
	l.ring = append(l.ring, r)
}

// Recent returns up to limit runs, newest first.
func (l *RunLog) Recent(limit int) []RunRecord {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.ring)
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]RunRecord, 0, limit)
	for i := n - 1; i >= n-limit; i-- {
		out = append(out, l.ring[i])
	}
	return out
}

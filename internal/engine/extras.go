package engine

import (
	"os"
	"strings"
	"time"
)

// Extras are per-run additions that a Request cannot carry because they come
// from the server, not the client. Background jobs use them: a job has its
// own time limit, and scripts report progress on an inherited descriptor
// with a helper module on PYTHONPATH (see package jobs).
type Extras struct {
	// Timeout, when > 0, replaces the request's timeout and is not capped
	// by Config.MaxTimeout (a job's limit is set by the job manager).
	Timeout time.Duration
	// Env holds KEY=VALUE entries set after the base environment and before
	// env_file and env_vars (so a request can still override them).
	Env []string
	// PythonPath entries are prepended to PYTHONPATH after every other
	// layer, so a PYTHONPATH from env_file or env_vars keeps working.
	PythonPath []string
	// ExtraFiles are inherited by Python as fd 3, 4, ... in order. The
	// caller keeps ownership (and closes its copies after the run).
	ExtraFiles []*os.File
	// ReadOnly are server-chosen paths the run must be able to read under
	// its confinement (an operator's --ruff binary), granted like the
	// interpreter; nothing else about the run changes.
	ReadOnly []string
	// Dedicated marks a long-lived run (a session): on the warm path, the
	// fork server that serves it is taken out of the pool and serves
	// nothing else (its namespaces are the run's alone), and the pool
	// starts a replacement.
	Dedicated bool

	// tmpEnv, when set, gives variables that name the run's temp dir (a
	// session's package overlay lives there); set after every other layer.
	tmpEnv func(tmpDir string) []string
	// prepared, when set, hears what the run was prepared as (a session
	// keeps its temp dir, interpreter and request for installs).
	prepared func(p *prepared)
}

func (x Extras) applyBefore(env *runEnv) {
	for _, kv := range x.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env.set(k, v)
		}
	}
}

func (x Extras) applyAfter(env *runEnv) {
	if len(x.PythonPath) == 0 {
		return
	}
	parts := append([]string{}, x.PythonPath...)
	if old, ok := env.get("PYTHONPATH"); ok && old != "" {
		parts = append(parts, old)
	}
	env.set("PYTHONPATH", strings.Join(parts, string(os.PathListSeparator)))
}

package engine

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/pyexec/pyexec/internal/launcher"
)

// WarmConfig configures warm interpreters.
type WarmConfig struct {
	// Spares is how many runs each warm interpreter keeps pre-forked and
	// ready; 0 disables warm interpreters (every run starts cold).
	Spares int
	// Preload lists modules each warm interpreter imports before it forks
	// (e.g. numpy,pandas): runs find them imported.
	Preload []string
	// MaxInterpreters bounds how many warm interpreters are kept in all;
	// the least recently used is retired. Default 4 (at least
	// PerInterpreter).
	MaxInterpreters int
	// PerInterpreter bounds how many warm interpreters one interpreter and
	// sandbox may have at once. A confined one serves one run at a time, so
	// this is how many confined runs can start warm concurrently. Default:
	// the number of CPUs, at least 2.
	PerInterpreter int
	// IdleTimeout retires a warm interpreter unused for this long.
	// Default 10 minutes.
	IdleTimeout time.Duration
	// Auto is adaptive preload: each warm interpreter learns which costly
	// modules its runs import and is replaced, in the background, by one
	// that has them imported already (adaptive.go). Nil: off.
	Auto *AutoPreload

	// wait makes a run wait for its warm interpreter to be ready instead of
	// running cold meanwhile (tests use it to exercise the warm path).
	wait bool
	// off keeps warm interpreters off even when tests force them on.
	off bool
	// busyWait and shortRun replace the constants of the same names (tests).
	busyWait, shortRun time.Duration
	// waiting counts runs waiting for a busy key (tests watch it).
	waiting *atomic.Int32
}

// WarmStats counts how runs were started.
type WarmStats struct {
	Warm        uint64            `json:"warm" jsonschema:"Runs forked from a warm interpreter."`
	Cold        uint64            `json:"cold" jsonschema:"Runs that started a fresh interpreter."`
	ColdReasons map[string]uint64 `json:"cold_reasons,omitempty" jsonschema:"Why runs started cold, with counts (e.g. a warm interpreter still starting, startup environment differs)."`
	Zygotes     int               `json:"zygotes" jsonschema:"Warm interpreters (fork servers) running now."`
	Preload     *PreloadStats     `json:"preload,omitempty" jsonschema:"Adaptive preload: what warm interpreters learned to import before forking. Absent when it is off."`
}

// runProcess is a started run: a launcher, or a warm supervisor.
type runProcess interface {
	Done() <-chan struct{}
	Terminate()
	Wait() (launcher.Event, error)
}

// startProcess starts p warm when it can, cold otherwise.
func (e *Engine) startProcess(p *prepared, opts launcher.Options, warm bool) (runProcess, error) {
	spec := launcher.Spec{Argv: p.argv, Env: p.env, Dir: p.dir, Grace: e.cfg.KillGrace, ExtraFiles: len(p.extraFiles), Sandbox: p.sandbox}
	if e.warm != nil && warm {
		if r := e.warm.start(p, opts); r != nil {
			return r, nil
		}
	}
	spec.Env = e.coldEnv(spec.Env) // pyrt.go
	proc, err := e.launchers.Start(spec, opts)
	if err != nil {
		return nil, err
	}
	return proc, nil
}

// closeWarm stops the warm interpreters (runs still in flight on them are
// killed); Engine.Close calls it.
func (e *Engine) closeWarm() {
	if e.warm != nil {
		e.warm.close()
	}
}

// PrestartStats reports the launchers started ahead (Config.Prestart), or
// nil when none are.
func (e *Engine) PrestartStats() *launcher.PoolStats {
	if e.cfg.Prestart <= 0 {
		return nil
	}
	st := e.launchers.Stats()
	return &st
}

// WarmStatsIfOn is WarmStats, or nil when warm interpreters are off.
func (e *Engine) WarmStatsIfOn() *WarmStats {
	if e.warm == nil {
		return nil
	}
	st := e.warm.statsSnapshot()
	return &st
}

// WarmStats reports how runs were started so far.
func (e *Engine) WarmStats() WarmStats {
	if e.warm == nil {
		return WarmStats{}
	}
	return e.warm.statsSnapshot()
}

// errWarmLost says a warm run never started: nobody took the request (the
// zygote died with it queued), or the fork could not confine itself or see
// the run's file. Nothing of the run ran, so it can start cold.
var errWarmLost = errors.New("warm interpreter did not start the run")

// errSupervisorLost says a warm run's supervisor died before it reported
// how the run ended: the run's exit status is unknown, and is not made up.
var errSupervisorLost = errors.New("the warm interpreter's supervisor died before reporting the run's exit status; the run's outcome is unknown (internal error; the warm interpreter was retired)")

package cli

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/session"
)

// engineFlags are the flags of every subcommand that runs Python.
type engineFlags struct {
	workspace      string
	stateDir       string
	python         string
	inheritEnv     bool
	defaultTimeout secondsFlag
	maxTimeout     secondsFlag
	outputCap      sizeFlag
	tmpLimit       sizeFlag
	maxWorkers     int
	sandbox        sandboxFlags
	deps           depsFlags // envs.go
	warm           int
	preload        string
	preloadAuto    bool
	maxUpload      sizeFlag

	maxSessions     int
	sessionIdle     secondsFlag
	sessionLifetime secondsFlag
}

// engineEnv: the seeds' environment variables, accepted as aliases.
var engineEnv = envSpec{aliases: map[string][]string{
	"max-timeout": {"MAX_SCRIPT_TIMEOUT"},
}}

// register adds the flags of a command that serves runs (mcp, serve,
// doctor, envs).
func (f *engineFlags) register(fs *flag.FlagSet) {
	f.registerCommon(fs, "timeout in seconds for runs that set none (> 0)", "largest timeout in seconds a run that is not a job may get (batch entries, /v1/run, /execute); larger ones are capped (> 0)")
	f.outputCap = sizeFlag(engine.DefaultOutputCap)
	fs.Var(&f.outputCap, "output-cap", "bytes of each output stream returned inline (head and tail kept), like 1MiB")
	f.tmpLimit = sizeFlag(engine.DefaultTmpLimit)
	fs.Var(&f.tmpLimit, "tmp-limit", "total size of all runs' temp dirs (TMPDIR), held in memory and counted against each run's memory limit, like 2GiB; -1 keeps them on the state dir's disk, uncapped (Linux, as root)")
	fs.IntVar(&f.maxWorkers, "max-workers", 0, "most batch snippets run at once (default: the core count)")
	fs.IntVar(&f.warm, "warm", 2, "runs kept pre-forked and ready per warm interpreter (a fork server per interpreter, started on demand); 0 disables warm interpreters")
	fs.StringVar(&f.preload, "preload", "", "comma-separated modules warm interpreters import before forking (e.g. numpy,pandas)")
	fs.BoolVar(&f.preloadAuto, "preload-auto", true, "adaptive preload: a warm interpreter learns which costly modules (>= 20 ms to import) its runs import, and a replacement that has them imported takes over in the background (server_info shows what was learned)")
	f.maxUpload = sizeFlag(executor.DefaultMaxUpload)
	fs.Var(&f.maxUpload, "max-upload", "largest file write_file and PUT /v1/files accept, like 100MiB")
	fs.IntVar(&f.maxSessions, "max-sessions", session.DefaultMaxSessions(), "most live Python sessions at once; past it session creation is refused")
	f.sessionIdle = secondsFlag{d: 30 * time.Minute}
	fs.Var(&f.sessionIdle, "session-idle-timeout", "seconds a session may stay unused before it is closed (> 0; a session may ask for its own idle_timeout)")
	f.sessionLifetime = secondsFlag{d: 24 * time.Hour}
	fs.Var(&f.sessionLifetime, "session-max-lifetime", "seconds a session may live at most (> 0)")
}

// registerRun adds the flags `pyexec run` uses: not the warm interpreters
// (one run per process gains nothing from them), batches or the inline
// output cap (the output streams to the terminal).
func (f *engineFlags) registerRun(fs *flag.FlagSet) {
	f.registerCommon(fs, "time limit of the run in seconds (> 0); the whole process tree is killed when it is over and pyexec exits 124", "")
}

func (f *engineFlags) registerCommon(fs *flag.FlagSet, timeoutUsage, maxUsage string) {
	fs.StringVar(&f.workspace, "workspace", "", "root directory runs may use: script_path, cwd and env_file must resolve inside it (default: the current directory)")
	fs.StringVar(&f.stateDir, "state-dir", engine.DefaultStateDir(), "directory for everything pyexec keeps (code files, temp dirs, environments, jobs)")
	fs.StringVar(&f.python, "python", "", "default interpreter, a path or a command on PATH (default: python3 on PATH, resolved past pyenv shims)")
	fs.BoolVar(&f.inheritEnv, "inherit-env", false, "give runs the server's environment instead of the minimal safe base")
	f.defaultTimeout = secondsFlag{d: engine.DefaultTimeout}
	fs.Var(&f.defaultTimeout, "timeout", timeoutUsage)
	f.maxTimeout = secondsFlag{d: engine.DefaultMaxTimeout}
	if maxUsage != "" {
		fs.Var(&f.maxTimeout, "max-timeout", maxUsage)
	}
	f.sandbox.register(fs)
	f.deps.register(fs)
}

func (f *engineFlags) config() (engine.Config, error) {
	box, err := f.sandbox.settings()
	if err != nil {
		return engine.Config{}, err
	}
	if err := checkWorkspace(f.workspace); err != nil {
		return engine.Config{}, err
	}
	return engine.Config{
		Sandbox:        box,
		RunAs:          f.sandbox.runAs,
		Workspace:      f.workspace,
		StateDir:       f.stateDir,
		Python:         f.python,
		InheritEnv:     f.inheritEnv,
		DefaultTimeout: f.defaultTimeout.d,
		MaxTimeout:     f.maxTimeout.d,
		OutputCap:      int(f.outputCap),
		TmpLimit:       int64(f.tmpLimit),
		Deps:           f.deps.config(),
		Warm:           f.warmConfig(),
	}, nil
}

func (f *engineFlags) warmConfig() engine.WarmConfig {
	w := engine.WarmConfig{Spares: f.warm, Preload: splitList(f.preload)}
	if f.preloadAuto {
		w.Auto = &engine.AutoPreload{}
	}
	return w
}

// checkWorkspace refuses a workspace (default: the current directory) that
// would let runs write the system or the whole home directory, with what to
// pass instead: a client that starts the server without --workspace starts
// it wherever it is, often / or the home directory.
func checkWorkspace(flag string) error {
	ws := flag
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("workspace: %w (pass --workspace DIR)", err)
		}
		ws = wd
	}
	abs, err := filepath.Abs(ws)
	if err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
	}
	if err := sandbox.CheckWorkspaceRoot(abs); err != nil {
		how := "pass --workspace DIR (or set PYEXEC_WORKSPACE) with the project directory runs may write"
		if flag == "" {
			how = "the workspace defaults to the current directory; " + how
		}
		return fmt.Errorf("--workspace: %v; %s", err, how)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (f *engineFlags) executor() (*executor.Local, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	ruff, err := f.deps.ruffPath()
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(cfg)
	if err != nil {
		return nil, err
	}
	l := executor.NewLocal(eng, Version, f.maxWorkers)
	l.SetRuff(ruff)
	l.SetMaxUpload(int64(f.maxUpload))
	l.ConfigureSessions(session.Config{MaxSessions: f.maxSessions, IdleTimeout: f.sessionIdle.d, MaxLifetime: f.sessionLifetime.d})
	return l, nil
}

// secondsFlag is a time flag in seconds. Negative, NaN and infinite values
// are refused, and so is 0 unless zeroMeans says what 0 turns off (one
// rule for every time flag; see the README's timeout story).
type secondsFlag struct {
	d         time.Duration
	zeroMeans string // "" : 0 is refused
}

func (s *secondsFlag) String() string {
	if s == nil {
		return ""
	}
	return strconv.FormatFloat(s.d.Seconds(), 'f', -1, 64)
}

func (s *secondsFlag) Set(v string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	switch {
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		return fmt.Errorf("want a number of seconds, like 30 or 0.5")
	case f < 0:
		if s.zeroMeans != "" {
			return fmt.Errorf("must be 0 (%s) or more seconds, got %g", s.zeroMeans, f)
		}
		return fmt.Errorf("must be more than 0 seconds, got %g", f)
	case f == 0 && s.zeroMeans == "":
		return fmt.Errorf("must be more than 0 seconds (leave the flag out for the default)")
	case f > maxFlagSeconds:
		return fmt.Errorf("%g seconds is more than pyexec can wait (%g, about 292 years)", f, maxFlagSeconds)
	}
	s.d = engine.SecondsUpTo(f, 0)
	return nil
}

// maxFlagSeconds is the longest time.Duration, in whole seconds.
const maxFlagSeconds = float64(math.MaxInt64 / int64(time.Second))

func seconds(s float64) time.Duration { return engine.SecondsUpTo(s, 0) }

package cli

import (
	"flag"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
)

// engineFlags are the flags of every subcommand that runs Python.
type engineFlags struct {
	workspace      string
	stateDir       string
	python         string
	inheritEnv     bool
	defaultTimeout float64
	maxTimeout     float64
	outputCap      int
	maxWorkers     int
	sandbox        sandboxFlags
	deps           depsFlags // envs.go
	warm           int
	preload        string
	maxUpload      int64
}

// engineAliases are the seeds' environment variables, accepted as aliases.
var engineAliases = map[string][]string{
	"max-timeout": {"MAX_SCRIPT_TIMEOUT"},
}

func (f *engineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.workspace, "workspace", "", "root directory runs may use: script_path, cwd and env_file must resolve inside it (default: the current directory)")
	fs.StringVar(&f.stateDir, "state-dir", engine.DefaultStateDir(), "directory for everything pyexec keeps (code files, temp dirs, environments, jobs)")
	fs.StringVar(&f.python, "python", "", "default interpreter, a path or a command on PATH (default: python3 on PATH, resolved past pyenv shims)")
	fs.BoolVar(&f.inheritEnv, "inherit-env", false, "give runs the server's environment instead of the minimal safe base")
	fs.Float64Var(&f.defaultTimeout, "timeout", engine.DefaultTimeout.Seconds(), "timeout in seconds for runs that set none")
	fs.Float64Var(&f.maxTimeout, "max-timeout", engine.DefaultMaxTimeout.Seconds(), "largest timeout in seconds a request may get; larger ones are capped")
	fs.IntVar(&f.outputCap, "output-cap", engine.DefaultOutputCap, "bytes of each output stream returned inline (head and tail kept)")
	fs.IntVar(&f.maxWorkers, "max-workers", 0, "most batch snippets run at once (default: the core count)")
	f.sandbox.register(fs)
	f.deps.register(fs)
	fs.IntVar(&f.warm, "warm", 2, "runs kept pre-forked and ready per warm interpreter (a fork server per interpreter, started on demand); 0 disables warm interpreters")
	fs.Int64Var(&f.maxUpload, "max-upload", executor.DefaultMaxUpload, "largest file in bytes write_file and PUT /v1/files accept")
	fs.StringVar(&f.preload, "preload", "", "comma-separated modules warm interpreters import before forking (e.g. numpy,pandas)")
}

func (f *engineFlags) config() (engine.Config, error) {
	box, err := f.sandbox.settings()
	if err != nil {
		return engine.Config{}, err
	}
	return engine.Config{
		Sandbox:        box,
		RunAs:          f.sandbox.runAs,
		Workspace:      f.workspace,
		StateDir:       f.stateDir,
		Python:         f.python,
		InheritEnv:     f.inheritEnv,
		DefaultTimeout: seconds(f.defaultTimeout),
		MaxTimeout:     seconds(f.maxTimeout),
		OutputCap:      f.outputCap,
		Deps:           f.deps.config(),
		Warm:           engine.WarmConfig{Spares: f.warm, Preload: splitList(f.preload)},
	}, nil
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
	l.SetMaxUpload(f.maxUpload)
	return l, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/pyexec/pyexec/internal/engine"
)

// runEnv: the flags that describe this one run (what to run, its cwd,
// interpreter and variables) have no PYEXEC_* variable: a PYEXEC_C left in
// an environment must not change what every later `pyexec run` executes.
var runEnv = envSpec{aliases: engineEnv.aliases, none: map[string]bool{
	"c": true, "cwd": true, "interpreter": true, "python-version": true, "env-file": true, "env": true, "with": true,
}}

// maxCLIStdin bounds how much piped input `pyexec run` forwards to a script.
const maxCLIStdin = 64 << 20

// runRun runs one request from the terminal, streaming the script's output
// as it comes, and exits with the script's exit code (124 on timeout, 128+N
// when killed by signal N, as shells report).
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		ef      engineFlags
		req     engine.Request
		envVars multiFlag
		with    listFlag
	)
	fs := newFlagSet("run", "run [flags] (-c CODE | FILE) [ARGS...] [-- ARGS...]", stderr, runEnv)
	ef.registerRun(fs)
	fs.StringVar(&req.Code, "c", "", "inline Python code to run (instead of FILE)")
	fs.StringVar(&req.Cwd, "cwd", "", "working directory of the run, inside the workspace")
	fs.StringVar(&req.Python, "interpreter", "", "absolute path of the interpreter for this run")
	fs.StringVar(&req.PythonVersion, "python-version", "", "Python version for this run, e.g. 3.12 (installed interpreters only)")
	fs.StringVar(&req.EnvFile, "env-file", "", ".env file (inside the workspace) loaded before --env")
	fs.Var(&envVars, "env", "KEY=VALUE environment variable for the run (repeatable)")
	fs.Var(&with, "with", "dependency (PEP 508, like 'requests>=2') installed for the run with uv into a cached environment (repeatable)")
	fs.StringVar(&req.Env, "use-env", "", "run in this named environment (pyexec envs create NAME --with PKG)")

	_ = takeEnvToken() // never handed to a run, even with --inherit-env
	before, after := splitDashDash(args)
	var positional []string
	rest := before
	for {
		if code, ok := parseFlagsOnly(fs, rest); !ok {
			return code
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		rest = rest[1:]
	}
	if err := applyEnv(fs, runEnv); err != nil {
		fmt.Fprintf(stderr, "pyexec run: %v\n", err)
		return 2
	}
	if req.Code == "" {
		if len(positional) == 0 {
			fmt.Fprintln(stderr, "pyexec run: give -c CODE or a FILE to run")
			fs.Usage()
			return 2
		}
		req.ScriptPath, positional = positional[0], positional[1:]
	}
	req.Args = append(positional, after...)
	req.EnvVars = envVars.m
	req.Dependencies = with

	// At the terminal the operator is the one asking: --timeout is the
	// run's limit, with no server cap to cut it down.
	ef.maxTimeout.d = ef.defaultTimeout.d
	if stdinData, err := pipedStdin(); err != nil {
		fmt.Fprintf(stderr, "pyexec run: %v\n", err)
		return 2
	} else {
		req.Stdin = stdinData
	}

	// One run per process: a warm interpreter would only cost a second
	// start (run has no --warm flag).
	ef.warm = 0
	cfg, err := ef.config()
	if err != nil {
		fmt.Fprintf(stderr, "pyexec run: %v\n", err)
		return 2
	}
	cfg.StdinLimit = maxCLIStdin
	eng, err := engine.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec run: %v\n", err)
		return 1
	}
	defer eng.Close() // a new dependency environment finishes sealing before exit
	res, err := eng.Run(ctx, req, &terminal{stdout: stdout, stderr: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "pyexec run: %v\n", err)
		var re *engine.RequestError
		if errors.As(err, &re) {
			return 2
		}
		return 1
	}
	if res.LimitExceeded != "" {
		fmt.Fprintf(stderr, "\n[LIMIT] the run exceeded its %s limit\n", res.LimitExceeded)
	}
	for _, n := range res.SandboxNotes {
		fmt.Fprintf(stderr, "[sandbox] %s\n", n)
	}
	switch {
	case res.TimedOut:
		fmt.Fprintf(stderr, "\n[TIMEOUT] killed after %.1fs\n", res.ElapsedSeconds)
		return 124
	case res.ExitCode < 0:
		return 128 - res.ExitCode
	}
	return res.ExitCode
}

// parseFlagsOnly parses without applying the environment (done once after
// the interspersed positional arguments are collected).
func parseFlagsOnly(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

func splitDashDash(args []string) (before, after []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

// pipedStdin returns standard input when it is a pipe or a file (never when
// it is a terminal: runs are not interactive).
func pipedStdin() (string, error) {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice != 0 {
		return "", nil
	}
	data, err := io.ReadAll(io.LimitReader(os.Stdin, maxCLIStdin+1))
	if err != nil {
		return "", fmt.Errorf("read stdin: %w", err)
	}
	if len(data) > maxCLIStdin {
		return "", fmt.Errorf("stdin is larger than the %d-byte limit", maxCLIStdin)
	}
	return string(data), nil
}

// terminal streams a run's output to the terminal as it arrives.
type terminal struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
}

func (t *terminal) Started(int) {}

func (t *terminal) Output(s engine.Stream, p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s == engine.Stdout {
		t.stdout.Write(p)
	} else {
		t.stderr.Write(p)
	}
}

// multiFlag collects repeated KEY=VALUE flags.
type multiFlag struct{ m map[string]string }

func (f *multiFlag) String() string { return "" }

func (f *multiFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	if f.m == nil {
		f.m = map[string]string{}
	}
	f.m[k] = val
	return nil
}

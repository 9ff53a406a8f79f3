// Package cli implements pyexec's subcommands. Each file is one subcommand;
// this one dispatches and holds what they share.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/pyexec/pyexec/internal/buildinfo"
)

// Version is pyexec's release version (stamped by release builds, else
// what the Go toolchain recorded; see internal/buildinfo).
var Version = buildinfo.Read().Version

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"mcp", "serve MCP over stdio (the default way to use pyexec from an MCP client)", runMCP},
		{"serve", "serve REST (/v1), the seed's /execute and MCP over HTTP (/mcp) on one listener", runServe},
		{"run", "run Python code or a script from the terminal with the same engine", runRun},
		{"sessions", "list or close the live Python sessions of a running server (sessions list | sessions close NAME)", runSessions},
		{"envs", "list or prune the cached dependency environments (envs list | envs prune)", runEnvs},
		{"doctor", "show what this machine offers: interpreters, uv, workspace, limits", runDoctor},
		{"version", "print the version", runVersion},
	}
}

// Main runs the subcommand named by args[0] and returns the exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return dispatch(ctx, args, os.Stdout, os.Stderr)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	if args[0] == "--version" || args[0] == "-version" {
		return runVersion(ctx, nil, stdout, stderr)
	}
	fmt.Fprintf(stderr, "pyexec: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "pyexec runs Python for AI agents (MCP) and people (CLI): fast, confined, with hard timeouts.")
	fmt.Fprintln(w, "\nUsage: pyexec COMMAND [flags]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'pyexec COMMAND --help' for a command's flags. Every flag can also be set as PYEXEC_<FLAG> (e.g. --max-timeout as PYEXEC_MAX_TIMEOUT).")
}

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, buildinfo.Read())
	return 0
}

// envSpec says which environment variables set a command's flags: every
// flag has PYEXEC_<FLAG> plus its aliases (the seeds' names), except the
// flags in none, which describe one run rather than a configuration (`run
// -c CODE`) and are never read from the environment.
type envSpec struct {
	aliases map[string][]string
	none    map[string]bool
}

func (e envSpec) vars(flagName string) []string {
	if e.none[flagName] {
		return nil
	}
	return append([]string{envName(flagName)}, e.aliases[flagName]...)
}

// parseFlags parses args into fs, then fills every flag the command line
// left unset from its environment variable (PYEXEC_<NAME>, or an alias). It
// reports problems itself; ok is false when the command should exit with code.
func parseFlags(fs *flag.FlagSet, args []string, env envSpec, stderr io.Writer) (code int, ok bool) {
	if err := fs.Parse(args); err != nil { // the flag package printed why
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if err := applyEnv(fs, env); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 2, false
	}
	return 0, true
}

func applyEnv(fs *flag.FlagSet, env envSpec) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		for _, name := range env.vars(f.Name) {
			v, ok := os.LookupEnv(name)
			if !ok {
				continue
			}
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
			return
		}
	})
	return errors.Join(errs...)
}

func envName(flagName string) string {
	b := []byte("PYEXEC_")
	for _, c := range []byte(flagName) {
		switch {
		case c == '-':
			b = append(b, '_')
		case c >= 'a' && c <= 'z':
			b = append(b, c-'a'+'A')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// newFlagSet makes a flag set whose help lists each flag as it is typed
// (-c, --timeout) with its environment variables.
func newFlagSet(name, synopsis string, stderr io.Writer, env envSpec) *flag.FlagSet {
	fs := flag.NewFlagSet("pyexec "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: pyexec %s\n\nFlags:\n", synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			dash := "--"
			if len(f.Name) == 1 {
				dash = "-"
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			vars := ""
			if v := env.vars(f.Name); len(v) > 0 {
				vars = " [$" + strings.Join(v, ", $") + "]"
			}
			fmt.Fprintf(stderr, "  %s%s\n        %s%s%s\n", dash, f.Name, f.Usage, def, vars)
		})
	}
	return fs
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

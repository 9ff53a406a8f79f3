package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Defaults of the limits every run is held to.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultMaxTimeout = 600 * time.Second
	DefaultCodeLimit  = 1 << 20 // bytes of inline code
	DefaultOutputCap  = 1 << 20 // bytes kept inline per stream
	DefaultKillGrace  = 500 * time.Millisecond
	DefaultPrestart   = 2
)

// Config is the server-wide part of every run: where it may work, what it
// may use, and the limits it is held to.
type Config struct {
	// Workspace is the root every script_path, cwd and env_file must resolve
	// into. Default: the current directory.
	Workspace string
	// StateDir holds everything pyexec keeps (inline code files, per-run
	// temp dirs, later environments and jobs).
	StateDir string
	// Python is the default interpreter (a path or a command on PATH);
	// empty means python3 on PATH.
	Python string
	// InheritEnv passes the server's environment to runs instead of the
	// minimal base.
	InheritEnv bool

	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	CodeLimit      int
	// StdinLimit bounds a request's stdin (default MaxStdinBytes); the CLI,
	// whose stdin is the operator's pipe, raises it.
	StdinLimit int
	OutputCap  int
	KillGrace  time.Duration
	// TmpLimit is the total size of all runs' temp dirs (0: DefaultTmpLimit,
	// negative: not capped). Enforced as root on Linux (tmpquota_linux.go).
	TmpLimit int64

	// Deps configures dependency environments built with uv (environment.go).
	Deps DepsConfig

	// Launcher is the binary re-executed as the per-run launcher; default
	// /proc/self/exe (see package launcher).
	Launcher string
	// Prestart is how many launchers are kept started ahead of the runs
	// that will need one (cold runs, fork servers, confined builds): the
	// exec of this binary and its runtime's start leave the request path
	// (launcher.Pool). 0: DefaultPrestart; negative: none.
	Prestart int

	// Sandbox is the confinement policy, network setting and resource
	// limits of every run (zero value: workspace policy, default limits).
	// Requests may only tighten it.
	Sandbox sandbox.Settings
	// RunAs says who Python runs as when the server is root: "auto"
	// (default: nobody when it can reach the interpreter and write the cwd,
	// else root without capabilities), "none", or a user (see
	// sandbox.ChooseRunAs).
	RunAs string

	// Warm configures warm interpreters (pool.go); zero: off.
	Warm WarmConfig
}

func (c *Config) setDefaults() error {
	if c.Prestart == 0 {
		c.Prestart = DefaultPrestart
	}
	if c.Workspace == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
		c.Workspace = wd
	}
	ws, err := filepath.Abs(c.Workspace)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", c.Workspace, err)
	}
	if ws, err = filepath.EvalSymlinks(ws); err != nil {
		return fmt.Errorf("workspace %s: %w", c.Workspace, err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return fmt.Errorf("workspace %s is not a directory", ws)
	}
	if err := sandbox.CheckWorkspaceRoot(ws); err != nil {
		return fmt.Errorf("%w; choose a project directory as the workspace", err)
	}
	c.Workspace = ws
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir()
	}
	if c.StateDir, err = filepath.Abs(c.StateDir); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = DefaultTimeout
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.CodeLimit <= 0 {
		c.CodeLimit = DefaultCodeLimit
	}
	if c.StdinLimit <= 0 {
		c.StdinLimit = MaxStdinBytes
	}
	if c.OutputCap <= 0 {
		c.OutputCap = DefaultOutputCap
	}
	if c.KillGrace <= 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.Sandbox.Policy == "" {
		c.Sandbox.Policy = sandbox.DefaultPolicy
	}
	if _, err := sandbox.ParsePolicy(string(c.Sandbox.Policy)); err != nil {
		return err
	}
	if _, err := sandbox.ParseNetwork(string(c.Sandbox.Network)); err != nil {
		return err
	}
	c.Sandbox.Limits = c.Sandbox.Limits.WithDefaults()
	return nil
}

// DefaultStateDir is $XDG_STATE_HOME/pyexec, else ~/.local/state/pyexec.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "pyexec")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "pyexec")
	}
	return filepath.Join(os.TempDir(), "pyexec-state")
}

// Package quality formats and lints Python with ruff, the real one from the
// package registry, run the way code runs.
//
// Why through the engine: a workspace file may have been written by a run,
// and so may the pyproject.toml or ruff.toml ruff reads its settings from
// (extend = "/etc/shadow", a cache-dir elsewhere, a src list). ruff executes
// nothing from its configuration, but it reads and writes files. So ruff is
// never started by the server: a small driver script (ruff_driver.py) runs
// through engine.RunWith like any inline run, as the run user, under the
// strict sandbox (no network, reads limited to the system, the interpreter
// and the workspace, writes only to the workspace and a private temp dir),
// and starts ruff from there with --no-cache. The workspace file is read,
// and with write: true written back, by the driver inside that sandbox; the
// server only resolves the path (inside the workspace, symlinks followed)
// and reads the driver's JSON report from a pipe. Whatever a hostile config
// makes ruff do, a run could do too. Project configuration is honoured (it
// is what users want their code formatted to) unless isolated is set.
//
// ruff itself lives in a named tool environment (pyexec-ruff), installed
// once by uv at the pinned RuffVersion and never evicted; --ruff PATH uses an
// operator's binary instead.
package quality

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// RuffVersion is the ruff installed into the tool environment.
const RuffVersion = "0.17.5"

// ToolEnv is the name of the tool environment holding ruff.
const ToolEnv = "pyexec-ruff"

const (
	runTimeout = 60 // seconds a format or lint run may take
	maxReport  = 32 << 20
	// MaxDiagnostics caps the diagnostics a lint returns (the count says
	// how many there were).
	MaxDiagnostics = 500
)

//go:embed ruff_driver.py
var driver string

// Runner formats and lints through an engine.
type Runner struct {
	eng  *engine.Engine
	ruff string // operator's ruff binary, or "" for the tool environment

	mu      sync.Mutex // serialises installing the tool environment
	version string     // the ruff version, once known
}

// New returns a Runner. ruff, when set, is a ruff binary to use instead of
// installing one (pyexec's --ruff flag).
func New(eng *engine.Engine, ruff string) *Runner { return &Runner{eng: eng, ruff: ruff} }

// Source is what to format or lint: inline code or a workspace script.
type Source struct {
	Code       string `json:"code,omitempty" jsonschema:"Python source to check (at most 1 MiB). Give code or script_path."`
	ScriptPath string `json:"script_path,omitempty" jsonschema:"A .py file inside the workspace (relative to cwd or absolute). Give code or script_path. It is only changed with write: true."`
	Cwd        string `json:"cwd,omitempty" jsonschema:"Directory inside the workspace that relative paths and configuration discovery start from (default: the workspace root). Inline code is checked as if it were a file there, so its pyproject.toml / ruff.toml settings apply."`
	Isolated   bool   `json:"isolated,omitempty" jsonschema:"Ignore every configuration file (pyproject.toml, ruff.toml) and use ruff's defaults plus the options given here."`
	Write      bool   `json:"write,omitempty" jsonschema:"With script_path: write the result back to the file (format: the formatted code; lint with fix: the fixed code). Never done otherwise; only files inside the workspace."`
}

// FormatRequest is format_code's input.
type FormatRequest struct {
	Source
	LineLength int  `json:"line_length,omitempty" jsonschema:"Line length to format to (default: the project's setting, else 88)."`
	Check      bool `json:"check,omitempty" jsonschema:"Only say whether formatting would change the code (no code, no diff, never writes)."`
}

// FormatResult is format_code's output.
type FormatResult struct {
	Changed     bool   `json:"changed" jsonschema:"True when formatting changes the code."`
	Formatted   string `json:"formatted,omitempty" jsonschema:"The formatted code (absent with check)."`
	Diff        string `json:"diff,omitempty" jsonschema:"Unified diff from the input to the formatted code (empty when unchanged; absent with check)."`
	Written     bool   `json:"written" jsonschema:"True when the formatted code was written back to script_path."`
	Path        string `json:"path,omitempty" jsonschema:"The workspace file that was read (script_path resolved)."`
	RuffVersion string `json:"ruff_version" jsonschema:"The ruff that ran."`
}

// LintRequest is lint_code's input.
type LintRequest struct {
	Source
	Select []string `json:"select,omitempty" jsonschema:"Rule codes or prefixes to check, replacing the configured selection: e.g. [\"F\", \"E\"], or [\"S\"] for the security rules (bandit's checks). Default: the project's selection, else ruff's defaults (E4, E7, E9, F)."`
	Fix    bool     `json:"fix,omitempty" jsonschema:"Also apply the safe fixes and return the fixed code (written back to script_path only with write: true)."`
}

// Diagnostic is one finding.
type Diagnostic struct {
	Rule             string `json:"rule" jsonschema:"Rule code, like F401 or S307."`
	Name             string `json:"name,omitempty" jsonschema:"Rule name, like unused-import."`
	Message          string `json:"message" jsonschema:"What is wrong."`
	Line             int    `json:"line" jsonschema:"Line (1-based)."`
	Column           int    `json:"column" jsonschema:"Column (1-based)."`
	EndLine          int    `json:"end_line" jsonschema:"Line where the finding ends."`
	EndColumn        int    `json:"end_column" jsonschema:"Column where the finding ends."`
	FixAvailable     bool   `json:"fix_available" jsonschema:"True when ruff can fix it (fix: true applies the safe ones)."`
	FixApplicability string `json:"fix_applicability,omitempty" jsonschema:"safe, unsafe or display-only, when a fix exists."`
	URL              string `json:"url,omitempty" jsonschema:"Documentation of the rule."`
}

// LintResult is lint_code's output.
type LintResult struct {
	Diagnostics []Diagnostic `json:"diagnostics" jsonschema:"Findings in the input, in file order (at most 500; count has them all)."`
	Count       int          `json:"count" jsonschema:"Number of findings."`
	Fixed       string       `json:"fixed,omitempty" jsonschema:"With fix: the code with the safe fixes applied."`
	Diff        string       `json:"diff,omitempty" jsonschema:"With fix: unified diff from the input to the fixed code."`
	Changed     bool         `json:"changed" jsonschema:"With fix: true when a fix changed the code."`
	Remaining   int          `json:"remaining" jsonschema:"With fix: findings left after fixing."`
	Written     bool         `json:"written" jsonschema:"True when the fixed code was written back to script_path."`
	Path        string       `json:"path,omitempty" jsonschema:"The workspace file that was read (script_path resolved)."`
	RuffVersion string       `json:"ruff_version" jsonschema:"The ruff that ran."`
}

// report is what the driver writes to fd 3.
type report struct {
	Error       string       `json:"error"`
	RuffVersion string       `json:"ruff_version"`
	Changed     bool         `json:"changed"`
	Formatted   string       `json:"formatted"`
	Diff        string       `json:"diff"`
	Written     bool         `json:"written"`
	Diagnostics []Diagnostic `json:"diagnostics"`
	Fixed       string       `json:"fixed"`
	Remaining   int          `json:"remaining"`
}

// driverOptions is the driver's JSON argument.
type driverOptions struct {
	Mode       string   `json:"mode"`
	Ruff       string   `json:"ruff,omitempty"`
	Version    string   `json:"version,omitempty"`
	Path       string   `json:"path,omitempty"`
	Name       string   `json:"name"`
	Label      string   `json:"label"`
	Isolated   bool     `json:"isolated,omitempty"`
	LineLength int      `json:"line_length,omitempty"`
	Check      bool     `json:"check,omitempty"`
	Write      bool     `json:"write,omitempty"`
	Select     []string `json:"select,omitempty"`
	Fix        bool     `json:"fix,omitempty"`
}

// Format formats the source.
func (r *Runner) Format(ctx context.Context, req FormatRequest) (FormatResult, error) {
	if req.LineLength < 0 || req.LineLength > 320 {
		return FormatResult{}, &engine.RequestError{Field: "line_length", Message: fmt.Sprintf("must be between 1 and 320, got %d", req.LineLength)}
	}
	if req.Check && req.Write {
		return FormatResult{}, &engine.RequestError{Field: "write", Message: "check only reports whether formatting would change the code; drop write or check"}
	}
	opts := driverOptions{Mode: "format", LineLength: req.LineLength, Check: req.Check}
	rep, path, err := r.run(ctx, req.Source, opts)
	if err != nil {
		return FormatResult{}, err
	}
	return FormatResult{Changed: rep.Changed, Formatted: rep.Formatted, Diff: rep.Diff, Written: rep.Written, Path: path, RuffVersion: rep.RuffVersion}, nil
}

// Lint lints the source.
func (r *Runner) Lint(ctx context.Context, req LintRequest) (LintResult, error) {
	if req.Write && !req.Fix {
		return LintResult{}, &engine.RequestError{Field: "write", Message: "lint only writes fixed code back: add fix: true, or drop write"}
	}
	for _, s := range req.Select {
		if !validRule(s) {
			return LintResult{}, &engine.RequestError{Field: "select", Message: fmt.Sprintf("%q is not a rule code or prefix (like F, E501, S or ALL)", s)}
		}
	}
	rep, path, err := r.run(ctx, req.Source, driverOptions{Mode: "lint", Select: req.Select, Fix: req.Fix})
	if err != nil {
		return LintResult{}, err
	}
	out := LintResult{Diagnostics: rep.Diagnostics, Count: len(rep.Diagnostics), Fixed: rep.Fixed, Diff: rep.Diff,
		Changed: rep.Changed, Remaining: rep.Remaining, Written: rep.Written, Path: path, RuffVersion: rep.RuffVersion}
	if out.Diagnostics == nil {
		out.Diagnostics = []Diagnostic{}
	}
	if len(out.Diagnostics) > MaxDiagnostics {
		out.Diagnostics = out.Diagnostics[:MaxDiagnostics]
	}
	return out, nil
}

// validRule accepts rule selectors: ALL or letters followed by digits.
func validRule(s string) bool {
	if s == "ALL" {
		return true
	}
	i := 0
	for i < len(s) && s[i] >= 'A' && s[i] <= 'Z' {
		i++
	}
	if i == 0 || i > 4 {
		return false
	}
	for _, c := range s[i:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(s) <= 10
}

// run resolves the source, makes sure ruff is there and runs the driver.
func (r *Runner) run(ctx context.Context, src Source, opts driverOptions) (report, string, error) {
	cfg := r.eng.Config()
	req := engine.Request{Code: driver, Sandbox: "strict", Timeout: runTimeout}
	switch {
	case src.Code != "" && src.ScriptPath != "":
		return report{}, "", &engine.RequestError{Field: "script_path", Message: "give either code or script_path, not both"}
	case src.ScriptPath != "":
		file, dir, err := r.eng.ResolveScriptPath(src.ScriptPath, src.Cwd)
		if err != nil {
			return report{}, "", err
		}
		req.Cwd = dir
		opts.Path, opts.Name = file, file
		opts.Label = relTo(cfg.Workspace, file)
	case src.Code != "":
		if len(src.Code) > cfg.CodeLimit {
			return report{}, "", &engine.RequestError{Field: "code", Message: fmt.Sprintf("is %d bytes; the limit is %d", len(src.Code), cfg.CodeLimit)}
		}
		if src.Write {
			return report{}, "", &engine.RequestError{Field: "write", Message: "write needs script_path (inline code has no file to write to)"}
		}
		dir, err := r.eng.ResolveCwd(src.Cwd)
		if err != nil {
			return report{}, "", err
		}
		req.Cwd, req.Stdin = dir, src.Code
		// Checked as if it were a file in cwd: configuration discovery and
		// per-file rules see that path.
		opts.Name, opts.Label = filepath.Join(dir, "snippet.py"), "snippet.py"
	default:
		return report{}, "", &engine.RequestError{Field: "code", Message: "give code (inline source) or script_path (a workspace .py file)"}
	}
	opts.Isolated, opts.Write = src.Isolated, src.Write

	var x engine.Extras
	if r.ruff != "" {
		opts.Ruff = r.ruff
		x.ReadOnly = []string{r.ruff}
	} else {
		bin, err := r.ensureRuff(ctx)
		if err != nil {
			return report{}, "", err
		}
		req.Env, opts.Ruff = ToolEnv, bin
	}
	r.mu.Lock()
	opts.Version = r.version
	r.mu.Unlock()
	arg, err := json.Marshal(opts)
	if err != nil {
		return report{}, "", err
	}
	req.Args = []string{string(arg)}

	pr, pw, err := os.Pipe()
	if err != nil {
		return report{}, "", fmt.Errorf("ruff: %w", err)
	}
	x.ExtraFiles = []*os.File{pw}
	got := make(chan []byte, 1)
	go func() {
		data, _ := io.ReadAll(io.LimitReader(pr, maxReport+1))
		io.Copy(io.Discard, pr) // never block the driver
		got <- data
	}()
	res, err := r.eng.RunWith(ctx, req, nil, x)
	pw.Close()
	var data []byte
	select {
	case data = <-got:
	case <-time.After(5 * time.Second): // a grandchild kept the pipe open
	}
	pr.Close()
	if err != nil {
		return report{}, "", fmt.Errorf("ruff: %w", err)
	}
	var rep report
	if len(data) > maxReport {
		return report{}, "", fmt.Errorf("ruff: its report is over %d bytes", maxReport)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return report{}, "", fmt.Errorf("ruff: no report from the driver (exit code %d, timed out %t): %s", res.ExitCode, res.TimedOut, tail(res.Stderr))
	}
	if rep.RuffVersion != "" {
		r.mu.Lock()
		r.version = rep.RuffVersion
		r.mu.Unlock()
	}
	if rep.Error != "" {
		field := "code"
		if src.ScriptPath != "" {
			field = "script_path"
		}
		return report{}, "", &engine.RequestError{Field: field, Message: "ruff: " + rep.Error}
	}
	return rep, opts.Path, nil
}

// ensureRuff installs ruff into the tool environment unless it is there at
// the pinned version, and returns the path of its ruff binary.
func (r *Runner) ensureRuff(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := "ruff==" + RuffVersion
	m := r.eng.Environments()
	rec, err := m.Named(ToolEnv)
	if err != nil && !errors.Is(err, uvenv.ErrNoNamedEnv) {
		return "", fmt.Errorf("ruff: %w", err)
	}
	if err != nil || len(rec.Requirements) != 1 || rec.Requirements[0] != want {
		if _, err := r.eng.CreateNamedEnv(ctx, ToolEnv, engine.EnvSpec{Dependencies: []string{want}, Tool: "ruff " + RuffVersion, Replace: true}, nil); err != nil {
			if ctx.Err() != nil {
				return "", fmt.Errorf("ruff: %w", ctx.Err())
			}
			return "", fmt.Errorf("ruff %s is not installed and could not be installed with uv (%v); install ruff yourself and start pyexec with --ruff /path/to/ruff", RuffVersion, err)
		}
	}
	// The env's own ruff: the run in env ToolEnv can read it, and the
	// driver need not look for it (importing ruff costs a sysconfig import).
	env, release, err := m.EnsureNamed(ctx, ToolEnv, nil)
	if err != nil {
		return "", fmt.Errorf("ruff: %w", err)
	}
	release()
	r.version = "ruff " + RuffVersion
	return filepath.Join(env.Dir, "bin", "ruff"), nil
}

func relTo(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return filepath.Base(path)
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 400 {
		s = "…" + strings.ToValidUTF8(s[len(s)-400:], "")
	}
	return string(bytes.TrimSpace([]byte(s)))
}

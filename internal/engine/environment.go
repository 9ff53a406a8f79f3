package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pyexec/pyexec/internal/uvenv"
)

// Execution strategies of runs in uv-built environments.
const (
	StrategyUVEnv     = uvenv.StrategyEnv     // dependencies and/or PEP 723 metadata
	StrategyUVProject = uvenv.StrategyProject // a pyproject.toml project, like `uv run`
)

// DepsConfig configures dependency environments (package uvenv).
type DepsConfig struct {
	// UV is the uv binary; empty finds one (PATH, past pyenv shims).
	UV string
	// Index settings every environment build uses (plus UV_* variables).
	Index uvenv.IndexSettings
	// MaxBytes caps the environment cache (0: 5 GiB; negative: no cap).
	MaxBytes int64
	// ProjectSync: "" (like `uv run`), "locked" or "frozen".
	ProjectSync string
	// NoProjects turns off pyproject.toml detection.
	NoProjects bool
}

// EnvironmentObserver is an optional extension of Observer: when the
// observer passed to Run implements it, it hears the phases of an
// environment build (creating, resolving, downloading, installing, done),
// so front ends can tell clients why a first call takes seconds.
type EnvironmentObserver interface {
	Environment(phase, detail string)
}

// Environments is the engine's environment cache (for `envs list|prune`).
func (e *Engine) Environments() *uvenv.Manager { return e.envs }

func newEnvironments(cfg Config) (*uvenv.Manager, error) {
	m, err := uvenv.New(uvenv.Config{
		StateDir:    cfg.StateDir,
		UV:          cfg.Deps.UV,
		Index:       cfg.Deps.Index,
		MaxBytes:    cfg.Deps.MaxBytes,
		ProjectSync: cfg.Deps.ProjectSync,
	})
	if err != nil {
		return nil, fmt.Errorf("environment cache: %w", err)
	}
	return m, nil
}

// envUse is a uv environment a run executes in.
type envUse struct {
	interp   Interpreter // the env's own bin/python
	strategy string      // StrategyUVEnv or StrategyUVProject
	resolved []string    // name==version of what is installed
	release  func()
}

// done gives the environment back (it may be evicted again); nil-safe.
func (u *envUse) done() {
	if u != nil {
		u.release()
	}
}

func (u *envUse) resolvedDependencies() []string {
	if u == nil {
		return nil
	}
	return u.resolved
}

// environment decides whether a run needs a uv environment and, if so,
// returns it in place of the chosen interpreter:
//
//   - a PEP 723 "# /// script" block (in inline code or the script file)
//     and/or req.Dependencies: an env with those requirements (uv-env). Like
//     `uv run --script`, a script with a block ignores any project around it;
//     requires-python picks the interpreter when none was requested.
//   - otherwise, unless an interpreter path was given: a pyproject.toml
//     project around the script (or the cwd for inline code), inside the
//     workspace, plus req.Dependencies on top (uv-project).
//
// Without any of these it returns nil and never touches uv, so runs without
// dependencies work on machines without uv. The envUse must be done() when
// the run is over (the env cannot be evicted until then).
func (e *Engine) environment(ctx context.Context, req *Request, file, cwd string, interp Interpreter, obs Observer) (*envUse, error) {
	if req.Env != "" {
		return e.namedEnvironment(ctx, req, obs) // named.go
	}
	src := []byte(req.Code)
	field := "code"
	if req.ScriptPath != "" {
		field = "script_path"
		var err error
		if src, err = os.ReadFile(file); err != nil {
			return nil, fmt.Errorf("read script: %w", err)
		}
	}
	meta, err := uvenv.ParseScriptMetadata(src)
	if err != nil {
		return nil, badRequest(field, "%v", err)
	}
	if _, err := uvenv.NormalizeRequirements(req.Dependencies); err != nil {
		return nil, badRequest("dependencies", "%v", err)
	}
	spec := uvenv.Spec{
		Requirements:   append(append([]string(nil), meta.Dependencies...), req.Dependencies...),
		RequiresPython: meta.RequiresPython,
	}
	if !meta.Found && req.Python == "" && !e.cfg.Deps.NoProjects && !req.NoProject {
		start := cwd
		if req.ScriptPath != "" {
			start = filepath.Dir(file)
		}
		if dir, found := uvenv.FindProject(start, e.cfg.Workspace); found {
			spec.ProjectDir, spec.WorkspaceRoot = dir, e.cfg.Workspace
		}
	}
	if spec.RequiresPython != "" && req.Python == "" && req.PythonVersion == "" {
		chosen, err := e.interpreterFor(ctx, interp, spec.RequiresPython)
		if err != nil {
			return nil, err
		}
		if len(spec.Requirements) == 0 && chosen.Path != interp.Path {
			// requires-python alone: no env, just the right interpreter.
			return &envUse{interp: chosen, strategy: StrategySystem, release: func() {}}, nil
		}
		interp = chosen
	}
	if len(spec.Requirements) == 0 && spec.ProjectDir == "" {
		return nil, nil
	}
	// Build on the base interpreter, not on a venv that happens to be in the
	// cwd: a venv's bin/python is a symlink to its base.
	spec.Python, spec.PythonVersion = interp.Path, interp.Version
	if isVenv(interp.Path) {
		if real, err := filepath.EvalSymlinks(interp.Path); err == nil && !isVenv(real) {
			spec.Python = real
		}
	}

	var progress uvenv.Progress
	if eo, ok := obs.(EnvironmentObserver); ok {
		progress = eo.Environment
	}
	env, release, err := e.envs.Ensure(ctx, spec, progress)
	switch {
	case err == nil:
		return &envUse{
			interp:   Interpreter{Path: env.Python, Version: env.PythonVersion, Source: "uv"},
			strategy: env.Strategy, resolved: env.Resolved, release: release,
		}, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("environment: %w", ctx.Err())
	case errors.Is(err, uvenv.ErrNoUV) && len(spec.Requirements) == 0:
		// Only a detected project asked for uv; without uv, `uv run` would
		// not work there either, and a plain run is what can still be done.
		return nil, nil
	case errors.Is(err, uvenv.ErrNoUV):
		return nil, badRequest("dependencies", "%v (it builds the environment for %s; runs without dependencies work without it)", uvenv.ErrNoUV, describeSpec(spec))
	default:
		// uv's own explanation ("No solution found ...") is in err.
		return nil, badRequest("dependencies", "%v", err)
	}
}

func describeSpec(s uvenv.Spec) string {
	what := fmt.Sprintf("%v", s.Requirements)
	if s.ProjectDir != "" {
		what = "the project " + s.ProjectDir
		if len(s.Requirements) > 0 {
			what += fmt.Sprintf(" with %v", s.Requirements)
		}
	}
	return what
}

// interpreterFor keeps the chosen interpreter when it satisfies a PEP 723
// requires-python, else picks the newest installed one that does (as
// `uv run --script` would, minus downloads).
func (e *Engine) interpreterFor(ctx context.Context, chosen Interpreter, requiresPython string) (Interpreter, error) {
	ok, err := uvenv.SatisfiesPython(chosen.Version, requiresPython)
	if err != nil {
		return Interpreter{}, badRequest("code", "PEP 723 metadata: %v", err)
	}
	if ok {
		return chosen, nil
	}
	var have []string
	for _, it := range e.interps.All(ctx) { // newest first
		if ok, _ := uvenv.SatisfiesPython(it.Version, requiresPython); ok {
			return it, nil
		}
		have = append(have, it.Version)
	}
	return Interpreter{}, badRequest("python_version", "the script requires Python %s, and no installed interpreter matches (available: %v); pyexec never downloads interpreters", requiresPython, have)
}

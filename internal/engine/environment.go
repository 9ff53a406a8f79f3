package engine

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/pyexec/pyexec/internal/uvenv"
	"github.com/pyexec/pyexec/internal/workspace"
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

// newEnvironments opens the environment cache; confine runs the builds
// that execute package code when a build's request gives no settings of
// its own (a named environment rebuilt on demand).
func newEnvironments(cfg Config, confine uvenv.Confiner) (*uvenv.Manager, error) {
	m, err := uvenv.New(uvenv.Config{
		Confine:     confine,
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
//
// src is the code or the script's content (read race-free as the run user);
// the project's files are read the same way. Builds that execute code run
// under the request's sandbox (buildConfiner).
func (e *Engine) environment(ctx context.Context, req *Request, src []byte, file, cwd string, interp Interpreter, rights workspace.Rights, obs Observer) (*envUse, error) {
	if req.Env != "" {
		return e.namedEnvironment(ctx, req, obs) // named.go
	}
	field := "code"
	if req.ScriptPath != "" {
		field = "script_path"
	}
	meta, err := uvenv.ParseScriptMetadata(src)
	if err != nil {
		return nil, badRequest(field, "%v", err)
	}
	blockReqs, err := e.localRequirements(meta.Dependencies, cwd, "the PEP 723 block of "+field+": ")
	if err != nil {
		return nil, err
	}
	reqReqs, err := e.localRequirements(req.Dependencies, cwd, "")
	if err != nil {
		return nil, err
	}
	files := workspace.Files{Root: e.ws, Rights: rights, Limit: maxSourceBytes}
	spec := uvenv.Spec{
		Requirements:   append(blockReqs, reqReqs...),
		RequiresPython: meta.RequiresPython,
		WorkspaceRoot:  e.cfg.Workspace,
		Files:          files,
	}
	if !meta.Found && req.Python == "" && !e.cfg.Deps.NoProjects && !req.NoProject {
		start := cwd
		if req.ScriptPath != "" {
			start = filepath.Dir(file)
		}
		// As before: a pyproject.toml that does not parse (or cannot be
		// read as the run user) is no project.
		if proj, found, err := uvenv.DetectProject(files, start, e.cfg.Workspace); err == nil && found {
			spec.ProjectDir = proj.Dir
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
	// Build on the trusted base interpreter (uv executes it as the
	// server), never on a venv or a path a request named.
	if interp.base == "" {
		return nil, badRequest("python", "%s is not one of this server's interpreters, nor a virtual environment made from one, so no dependency environment can be built on it (uv would execute it unconfined): ask for a python_version instead", interp.Path)
	}
	spec.Python, spec.PythonVersion = interp.base, interp.Version
	spec.Confine = e.buildConfiner(req)

	var progress uvenv.Progress
	if eo, ok := obs.(EnvironmentObserver); ok {
		progress = eo.Environment
	}
	env, release, err := e.envs.Ensure(ctx, spec, progress)
	switch {
	case err == nil:
		return &envUse{
			interp:   Interpreter{Path: env.Python, Version: env.PythonVersion, Source: "uv", kind: kindEnv, base: env.BasePython},
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
	for _, it := range e.interps.complete(ctx) { // newest first
		if ok, _ := uvenv.SatisfiesPython(it.Version, requiresPython); ok {
			return it, nil
		}
		have = append(have, it.Version)
	}
	return Interpreter{}, badRequest("python_version", "the script requires Python %s, and no installed interpreter matches (available: %v); pyexec never downloads interpreters", requiresPython, have)
}

// localRequirements checks requirements that name a local path (file: URLs
// and plain paths): each must resolve inside the workspace, and is passed
// to uv as the file: URL of what it resolved to. Such requirements are
// built only confined (package uvenv). Errors name the dependencies field;
// where says where the requirement came from ("" or "the PEP 723 block of
// code: ").
func (e *Engine) localRequirements(reqs []string, cwd, where string) ([]string, error) {
	const field = "dependencies"
	out := make([]string, 0, len(reqs))
	for _, s := range reqs {
		if s == "" {
			continue
		}
		r, err := uvenv.ParseRequirement(s)
		if err != nil {
			return nil, badRequest(field, "%s%v", where, err)
		}
		if err := checkRequirementURL(r); err != nil {
			return nil, badRequest(field, "%s%q: %v", where, s, err)
		}
		p := r.LocalPath()
		if p == "" {
			out = append(out, s)
			continue
		}
		real, err := e.ws.Resolve(p, cwd)
		if err != nil {
			return nil, badRequest(field, "%s%q names a local path, and local requirements must lie inside the workspace: %v", where, s, err)
		}
		r.URL = (&url.URL{Scheme: "file", Path: real}).String()
		out = append(out, r.String())
	}
	return out, nil
}

// checkRequirementURL accepts the URL schemes uv installs from.
func checkRequirementURL(r uvenv.Requirement) error {
	if r.URL == "" || r.LocalPath() != "" {
		return nil
	}
	for _, scheme := range []string{"https://", "http://", "git+", "hg+", "svn+", "bzr+"} {
		if strings.HasPrefix(r.URL, scheme) {
			return nil
		}
	}
	return fmt.Errorf("the URL scheme is not one uv installs from (https, git+..., file: inside the workspace)")
}

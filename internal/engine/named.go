package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/uvenv"
	"github.com/pyexec/pyexec/internal/workspace"
)

// Named environments: env_create builds a persistent environment under a
// name (uvenv.Manager.CreateNamed), and a request with env: NAME runs in it.
// A named environment is exactly the interpreter and packages it was
// created with, so a request naming one may not also ask for dependencies
// or an interpreter (the error names the field), and the script's PEP 723
// block and any project around it are not used.
//
// Sessions, when they land, take env like any run: their creation settings
// are a Request, and the engine that starts the session process resolves
// req.Env here as it does for runs.

// checkNamedEnv rejects what cannot be combined with env.
func checkNamedEnv(req *Request) error {
	if req.Env == "" {
		return nil
	}
	if err := uvenv.CheckName(req.Env); err != nil {
		return badRequest("env", "%v", err)
	}
	switch {
	case len(req.Dependencies) > 0:
		return badRequest("dependencies", "a run in the named environment %q uses its packages; create another environment (env_create) for more", req.Env)
	case req.Python != "":
		return badRequest("python", "a run in the named environment %q uses its interpreter; leave python unset", req.Env)
	case req.PythonVersion != "":
		return badRequest("python_version", "a run in the named environment %q uses its interpreter; leave python_version unset", req.Env)
	}
	return nil
}

// namedEnvironment is environment() for a request with env: NAME.
func (e *Engine) namedEnvironment(ctx context.Context, req *Request, obs Observer) (*envUse, error) {
	if err := checkNamedEnv(req); err != nil {
		return nil, err
	}
	var progress uvenv.Progress
	if eo, ok := obs.(EnvironmentObserver); ok {
		progress = eo.Environment
	}
	env, release, err := e.envs.EnsureNamed(ctx, req.Env, progress)
	switch {
	case errors.Is(err, uvenv.ErrNoNamedEnv):
		return nil, badRequest("env", "no environment is named %q; env_list shows the named environments, env_create makes one", req.Env)
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("environment: %w", ctx.Err())
	case err != nil:
		return nil, badRequest("env", "%v", err)
	}
	return &envUse{
		interp:   Interpreter{Path: env.Python, Version: env.PythonVersion, Source: "uv", kind: kindEnv, base: env.BasePython},
		strategy: env.Strategy, resolved: env.Resolved, release: release,
	}, nil
}

// ReservedEnvPrefix starts the names of environments pyexec keeps for its
// own tools (pyexec-ruff).
const ReservedEnvPrefix = "pyexec-"

// EnvSpec is what a named environment is made of.
type EnvSpec struct {
	Dependencies  []string
	PythonVersion string // "" the default interpreter
	// Tool marks an environment pyexec keeps for one of its tools.
	Tool string
	// Replace rebinds an existing name.
	Replace bool
}

// CreateNamedEnv builds a persistent environment with spec's packages on
// the chosen installed interpreter and names it. obs, when it implements
// EnvironmentObserver, hears the build phases.
func (e *Engine) CreateNamedEnv(ctx context.Context, name string, spec EnvSpec, obs Observer) (uvenv.NamedEnv, error) {
	if err := uvenv.CheckName(name); err != nil {
		return uvenv.NamedEnv{}, badRequest("name", "%v", err)
	}
	if spec.Tool == "" && strings.HasPrefix(name, ReservedEnvPrefix) {
		return uvenv.NamedEnv{}, badRequest("name", "names starting with %q are kept for pyexec's own tools; choose another", ReservedEnvPrefix)
	}
	if len(spec.Dependencies) == 0 {
		return uvenv.NamedEnv{}, badRequest("dependencies", "give at least one requirement, like [\"numpy\", \"pandas>=2\"]")
	}
	// Local requirements must lie in the workspace (relative ones: from
	// its root), as a run's.
	reqs, err := e.localRequirements(spec.Dependencies, e.cfg.Workspace, "")
	if err != nil {
		return uvenv.NamedEnv{}, err
	}
	var interp Interpreter
	if spec.PythonVersion != "" {
		// The cwd plays no part: a named environment is built on an
		// installed interpreter, never on a workspace .venv.
		interp, _, err = e.chooseInterpreter(ctx, &Request{PythonVersion: spec.PythonVersion}, e.cfg.Workspace, workspace.ServerRights)
	} else {
		interp, err = e.defaultInterpreter(ctx)
	}
	if err != nil {
		return uvenv.NamedEnv{}, err
	}
	if interp.base == "" {
		return uvenv.NamedEnv{}, badRequest("python_version", "%s is not one of this server's trusted interpreters", interp.Path)
	}
	var progress uvenv.Progress
	if eo, ok := obs.(EnvironmentObserver); ok {
		progress = eo.Environment
	}
	// What has to be built from source is built confined, under the
	// server's own sandbox settings (no request tightens them here).
	rec, _, err := e.envs.CreateNamed(ctx, name, uvenv.Spec{Python: interp.base, PythonVersion: interp.Version, Requirements: reqs,
		WorkspaceRoot: e.cfg.Workspace, Confine: e.buildConfiner(&Request{})}, spec.Replace, spec.Tool, progress)
	switch {
	case err == nil:
		return rec, nil
	case ctx.Err() != nil:
		return uvenv.NamedEnv{}, fmt.Errorf("environment: %w", ctx.Err())
	case errors.Is(err, uvenv.ErrNoUV):
		return uvenv.NamedEnv{}, badRequest("dependencies", "%v (it builds named environments)", err)
	}
	var re *RequestError
	if errors.As(err, &re) {
		return uvenv.NamedEnv{}, err
	}
	return uvenv.NamedEnv{}, badRequest("dependencies", "%v", err)
}

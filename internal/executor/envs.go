package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// EnvExecutor is an Executor that manages the dependency environment cache
// and its named environments (env_list, env_create, env_delete; REST
// /v1/envs). Front ends check for it with a type assertion.
type EnvExecutor interface {
	Envs(ctx context.Context) (EnvList, error)
	// CreateEnv builds a persistent environment under a name; progress
	// hears the build (it can take a minute for big packages).
	CreateEnv(ctx context.Context, req EnvCreateRequest, progress ProgressFunc) (EnvInfo, error)
	DeleteEnv(ctx context.Context, name string) (EnvDeleteResult, error)
}

// EnvCreateRequest asks for a named environment.
type EnvCreateRequest struct {
	Name          string   `json:"name" jsonschema:"Name to give the environment (letters, digits, _ . -; at most 64). Runs then use it with env: NAME."`
	Dependencies  []string `json:"dependencies" jsonschema:"PEP 508 requirements to install, like [\"numpy\", \"pandas>=2\"]."`
	PythonVersion string   `json:"python_version,omitempty" jsonschema:"Installed Python version to build on, like 3.12 (default: the server's default interpreter; never downloaded)."`
}

// EnvInfo is one environment of the cache.
type EnvInfo struct {
	Key           string    `json:"key" jsonschema:"Cache key (interpreter + normalized requirements + index settings)."`
	Names         []string  `json:"names,omitempty" jsonschema:"Names bound to this environment (use one as env: NAME); named environments are pinned."`
	Pinned        bool      `json:"pinned" jsonschema:"True for named environments: LRU eviction and prune never remove them, only env_delete does."`
	Tool          string    `json:"tool,omitempty" jsonschema:"Set when pyexec keeps this environment for one of its own tools (e.g. ruff)."`
	Strategy      string    `json:"strategy,omitempty" jsonschema:"uv-env (requirements) or uv-project (a pyproject.toml project)."`
	Interpreter   string    `json:"interpreter" jsonschema:"Base interpreter the environment was built on."`
	PythonVersion string    `json:"python_version" jsonschema:"Its Python version."`
	Requirements  []string  `json:"requirements,omitempty" jsonschema:"Requirements it was built for (normalized)."`
	Resolved      []string  `json:"resolved_dependencies,omitempty" jsonschema:"Exact name==version of everything installed."`
	ProjectDir    string    `json:"project_dir,omitempty" jsonschema:"The project directory, for uv-project environments."`
	SizeBytes     int64     `json:"size_bytes" jsonschema:"Size on disk."`
	LastUsed      time.Time `json:"last_used,omitzero" jsonschema:"When a run last used it (LRU eviction removes the least recently used unpinned ones first)."`
	InUse         bool      `json:"in_use" jsonschema:"True while a run uses it."`
	Built         bool      `json:"built" jsonschema:"False for a named environment whose files are gone: it is rebuilt at its next use."`
}

// EnvList is the whole cache.
type EnvList struct {
	Envs       []EnvInfo `json:"envs" jsonschema:"Every cached environment, most recently used first; named environments whose files are gone at the end."`
	TotalBytes int64     `json:"total_bytes" jsonschema:"Size of all cached environments together."`
}

// EnvDeleteResult says what env_delete did.
type EnvDeleteResult = uvenv.DeleteResult

var _ EnvExecutor = (*Local)(nil)

// Envs implements EnvExecutor.
func (l *Local) Envs(ctx context.Context) (EnvList, error) {
	m := l.eng.Environments()
	envs, err := m.List(ctx)
	if err != nil {
		return EnvList{}, err
	}
	named, err := m.NamedEnvs()
	if err != nil {
		return EnvList{}, err
	}
	tools := map[string]string{}
	for _, n := range named {
		if n.Tool != "" {
			tools[n.Key] = n.Tool
		}
	}
	out := EnvList{Envs: []EnvInfo{}}
	seen := map[string]bool{}
	for _, e := range slices.Backward(envs) { // List is least recently used first
		seen[e.Key] = true
		out.TotalBytes += e.SizeBytes
		out.Envs = append(out.Envs, EnvInfo{
			Key: e.Key, Names: e.Names, Pinned: len(e.Names) > 0, Tool: tools[e.Key], Strategy: e.Strategy,
			Interpreter: e.BasePython, PythonVersion: e.PythonVersion, Requirements: e.Requirements, Resolved: e.Resolved,
			ProjectDir: e.ProjectDir, SizeBytes: e.SizeBytes, LastUsed: e.LastUsed, InUse: e.InUse, Built: true,
		})
	}
	for _, n := range named {
		if seen[n.Key] {
			continue
		}
		out.Envs = append(out.Envs, EnvInfo{Key: n.Key, Names: []string{n.Name}, Pinned: true, Tool: n.Tool, Strategy: uvenv.StrategyEnv,
			Interpreter: n.Python, PythonVersion: n.PythonVersion, Requirements: n.Requirements})
	}
	return out, nil
}

// CreateEnv implements EnvExecutor.
func (l *Local) CreateEnv(ctx context.Context, req EnvCreateRequest, progress ProgressFunc) (EnvInfo, error) {
	var c counter
	stop := c.heartbeat(progress, func(p *Progress) {
		step := "resolving"
		if s := c.envStep.Load(); s != nil {
			step = *s
		}
		p.Message = fmt.Sprintf("%.1fs, building environment %q: %s", p.ElapsedSeconds, req.Name, step)
	})
	defer stop()
	rec, err := l.eng.CreateNamedEnv(ctx, req.Name, engine.EnvSpec{Dependencies: req.Dependencies, PythonVersion: req.PythonVersion}, &c)
	if err != nil {
		return EnvInfo{}, err
	}
	list, err := l.Envs(ctx)
	if err != nil {
		return EnvInfo{}, err
	}
	for _, e := range list.Envs {
		if e.Key == rec.Key {
			return e, nil
		}
	}
	return EnvInfo{Key: rec.Key, Names: []string{rec.Name}, Pinned: true, Interpreter: rec.Python, PythonVersion: rec.PythonVersion, Requirements: rec.Requirements}, nil
}

// DeleteEnv implements EnvExecutor.
func (l *Local) DeleteEnv(ctx context.Context, name string) (EnvDeleteResult, error) {
	if err := uvenv.CheckName(name); err != nil {
		return EnvDeleteResult{}, &engine.RequestError{Field: "name", Message: err.Error()}
	}
	res, err := l.eng.Environments().DeleteNamed(ctx, name)
	if errors.Is(err, uvenv.ErrNoNamedEnv) {
		return EnvDeleteResult{}, &engine.RequestError{Field: "name", Message: fmt.Sprintf("no environment is named %q; env_list shows the named environments", name)}
	}
	return res, err
}

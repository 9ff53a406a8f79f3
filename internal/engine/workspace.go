package engine

import (
	"fmt"
	"os"

	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/workspace"
)

// The path rules live in package workspace; here they get the request's
// field names, and reads get the run user's rights.

func (e *Engine) insideWorkspace(field, p, base string) (string, error) {
	real, err := e.ws.Resolve(p, base)
	if err != nil {
		return "", badRequest(field, "%v", err)
	}
	return real, nil
}

func (e *Engine) resolveCwd(cwd string) (string, error) {
	dir, err := e.ws.ResolveDir(cwd)
	if err != nil {
		return "", badRequest("cwd", "%v", err)
	}
	return dir, nil
}

func (e *Engine) resolveScript(scriptPath, cwd string) (string, error) {
	p, err := e.ws.ResolveScript(scriptPath, cwd)
	if err != nil {
		return "", badRequest("script_path", "%v", err)
	}
	return p, nil
}

// Read limits of files the server reads on a request's behalf.
const (
	maxEnvFileBytes = 1 << 20  // an env_file (the run's whole environment is capped at 1 MiB too)
	maxSourceBytes  = 16 << 20 // a script read for its PEP 723 block, a pyproject.toml, a uv.lock
)

// readRights are the rights reads on req's behalf are held to: those of
// the user its run executes as, with the workspace as that run sees it
// (idmapped or not). Runs under policy none execute as the server.
func (e *Engine) readRights(req *Request, cwd string) (workspace.Rights, error) {
	settings, err := e.sandboxSettings(req)
	if err != nil {
		return workspace.Rights{}, err
	}
	if settings.Policy == sandbox.PolicyNone {
		return workspace.ServerRights, nil
	}
	choice, err := e.runAs.choose(e.cfg.RunAs, cwd, []string{codeDir(e.cfg.StateDir)}, codeDir(e.cfg.StateDir))
	if err != nil {
		return workspace.Rights{}, fmt.Errorf("run-as: %w", err)
	}
	r := workspace.Rights{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid()),
		ServerUID: uint32(os.Geteuid()), ServerGID: uint32(os.Getegid())}
	if choice.Cred != nil {
		r.UID, r.GID, r.Idmapped = choice.Cred.UID, choice.Cred.GID, choice.IdmappedWorkspace
	}
	return r, nil
}

// readWorkspaceFile reads path, as the path rules resolved it, for field:
// a symlink found on it now appeared since, and is refused.
func (e *Engine) readWorkspaceFile(field, name, path string, rights workspace.Rights, limit int64) ([]byte, error) {
	data, err := e.ws.ReadFile(path, rights, limit)
	if err != nil {
		return nil, badRequest(field, "cannot read %q: %v", name, err)
	}
	return data, nil
}

// Files is the workspace as the files tools reach it: pyexec's state dir
// hidden, and the rights of the user a run with the server's default
// settings executes as, which every read, write and delete is held to.
func (e *Engine) Files() (*workspace.Root, workspace.Rights, error) {
	rights, err := e.readRights(&Request{}, e.cfg.Workspace)
	if err != nil {
		return nil, workspace.Rights{}, err
	}
	return e.ws.HideTree(e.cfg.StateDir), rights, nil
}

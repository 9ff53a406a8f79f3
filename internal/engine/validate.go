package engine

import (
	"context"

	"github.com/pyexec/pyexec/internal/uvenv"
)

// Validate checks req as Run would, without running anything, writing code
// files or building environments. Front ends that queue a request (jobs)
// use it so a malformed request is rejected at once, naming the field,
// instead of surfacing later as a failed job.
func (e *Engine) Validate(ctx context.Context, req Request) error {
	if err := e.checkSource(&req); err != nil {
		return err
	}
	if err := checkNamedEnv(&req); err != nil {
		return err
	}
	if _, err := e.timeout(req.Timeout); err != nil {
		return err
	}
	if _, err := e.sandboxSettings(&req); err != nil {
		return err
	}
	cwd, err := e.resolveCwd(req.Cwd)
	if err != nil {
		return err
	}
	rights, err := e.readRights(&req, cwd)
	if err != nil {
		return err
	}
	src, field := []byte(req.Code), "code"
	if req.ScriptPath != "" {
		file, err := e.resolveScript(req.ScriptPath, cwd)
		if err != nil {
			return err
		}
		if src, err = e.readWorkspaceFile("script_path", req.ScriptPath, file, rights, maxSourceBytes); err != nil {
			return err
		}
		field = "script_path"
	}
	meta, err := uvenv.ParseScriptMetadata(src)
	if err != nil {
		return badRequest(field, "%v", err)
	}
	if _, err := e.localRequirements(meta.Dependencies, cwd, "the PEP 723 block of "+field+": "); err != nil {
		return err
	}
	if _, err := e.localRequirements(req.Dependencies, cwd, ""); err != nil {
		return err
	}
	if _, _, err := e.chooseInterpreter(ctx, &req, cwd, rights); err != nil {
		return err
	}
	return e.applyRequestEnv(&runEnv{vars: map[string]string{}}, &req, cwd, rights)
}

// checkSource enforces exactly one of code and script_path, and the code
// size limit.
func (e *Engine) checkSource(req *Request) error {
	switch {
	case req.Code != "" && req.ScriptPath != "":
		return badRequest("code", "give either code or script_path, not both")
	case req.Code == "" && req.ScriptPath == "":
		return badRequest("code", "give one of code (inline source) or script_path (a .py file in the workspace)")
	case len(req.Code) > e.cfg.CodeLimit:
		return badRequest("code", "is %d bytes; the limit is %d bytes", len(req.Code), e.cfg.CodeLimit)
	}
	return nil
}

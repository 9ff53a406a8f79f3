package engine

// Path rules for front ends that act on workspace files without running
// them (format_code and lint_code): the same resolution a run's cwd and
// script_path get, so a tool never reaches a file a run could not name.

// ResolveCwd resolves a request's cwd like a run's: inside the workspace,
// symlinks followed, a directory; "" is the workspace root.
func (e *Engine) ResolveCwd(cwd string) (string, error) { return e.resolveCwd(cwd) }

// ResolveScriptPath resolves script_path like a run's: relative to the
// resolved cwd, symlinks followed, an existing .py regular file inside the
// workspace. It returns the file and the resolved cwd.
func (e *Engine) ResolveScriptPath(scriptPath, cwd string) (file, dir string, err error) {
	if dir, err = e.resolveCwd(cwd); err != nil {
		return "", "", err
	}
	if file, err = e.resolveScript(scriptPath, dir); err != nil {
		return "", "", err
	}
	return file, dir, nil
}

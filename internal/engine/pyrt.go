package engine

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The run's Python side (pyrt/): display(), rich reprs, figure capture and
// the traceback hook. Cold runs get it through pyrt/sitecustomize.py, put
// first on PYTHONPATH only for the cold start (it removes itself from
// sys.path and PYTHONPATH at once); warm runs get it from the driver, which
// loads pyexec_rt.py once per fork server and installs it per run. Either
// way a run that displays nothing pays only for installing a few hooks.
//
//go:embed pyrt/*.py
var pyrtFiles embed.FS

func pyrtDir(state string) string { return filepath.Join(state, "pyrt") }

// writePyrt puts the runtime files in the state dir (readable by runs,
// writable by the server only).
func writePyrt(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	entries, err := pyrtFiles.ReadDir("pyrt")
	if err != nil {
		return err
	}
	for _, ent := range entries {
		data, err := pyrtFiles.ReadFile("pyrt/" + ent.Name())
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, ent.Name())
		if old, err := os.ReadFile(dst); err == nil && string(old) == string(data) {
			continue
		}
		tmp, err := os.CreateTemp(dir, ".tmp-*")
		if err != nil {
			return fmt.Errorf("write %s: %w", dst, err)
		}
		_, werr := tmp.Write(data)
		cerr := tmp.Close()
		if err := firstErr(werr, cerr, os.Chmod(tmp.Name(), 0o644), os.Rename(tmp.Name(), dst)); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("write %s: %w", dst, err)
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// setRuntimeEnv adds what the run's Python side reads: where to record
// displays (inside the run's temp dir), the workspace (tracebacks name
// scripts relative to it), and matplotlib's headless defaults (a user's
// own MPLBACKEND or MPLCONFIGDIR wins: request layers come later).
func (e *Engine) setRuntimeEnv(env *runEnv, tmpDir string) {
	env.set("PYEXEC_OUTPUT_DIR", outputDir(tmpDir))
	env.set("PYEXEC_WORKSPACE", e.cfg.Workspace)
	if _, ok := env.get("MPLBACKEND"); !ok {
		env.set("MPLBACKEND", "Agg")
	}
	if _, ok := env.get("MPLCONFIGDIR"); !ok {
		env.set("MPLCONFIGDIR", filepath.Join(tmpDir, "matplotlib"))
	}
}

// coldEnv is a run's environment for a cold start: pyrt first on
// PYTHONPATH so that site imports its sitecustomize.
func (e *Engine) coldEnv(env []string) []string {
	dir := pyrtDir(e.cfg.StateDir)
	out := make([]string, 0, len(env)+1)
	found := false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			found = true
			if v != "" {
				kv = "PYTHONPATH=" + dir + string(os.PathListSeparator) + v
			} else {
				kv = "PYTHONPATH=" + dir
			}
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, "PYTHONPATH="+dir)
	}
	return out
}

//go:build linux

package engine

// Which runs may start warm, and which warm interpreter they may use: a
// cold start must be identical (argv, startup environment, sources), and a
// zygote is keyed by interpreter and confinement.

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/workspace"
)

// ineligible says why p cannot run warm ("" when it can).
func (w *warmPool) ineligible(p *prepared) string {
	if len(p.argv) < 3 || p.argv[0] != p.interp.Path || p.argv[1] != "-u" {
		return "interpreter options"
	}
	if !eligibleVersion(p.interp.Version) {
		return "python older than 3.8"
	}
	if len(p.extraFiles) > maxExtraFiles {
		return "too many extra files"
	}
	size := len(p.dir)
	for _, s := range p.argv {
		size += len(s) + 1
		if strings.IndexByte(s, 0) >= 0 {
			return "NUL in argv"
		}
	}
	for _, s := range p.env {
		size += len(s) + 1
		if strings.IndexByte(s, 0) >= 0 {
			return "NUL in env"
		}
	}
	if size > maxWarmRequest {
		return "request too large"
	}
	if p.sourceNUL {
		// How the file tokenizer treats NUL bytes changed within 3.11.x
		// (older ones stop the line there, newer ones raise SyntaxError);
		// compile() in the driver cannot reproduce both.
		return "NUL in source"
	}
	return ""
}

// warmKey names the zygotes a run can use: its interpreter and what the
// zygote is confined with (settings, identity, workspace, hidden trees).
// Whether a zygote's grants cover the run's paths is checked per run.
func warmKey(p *prepared) string {
	if p.sandbox == nil {
		return p.interp.Path
	}
	s := p.sandbox
	settings := s.Settings
	settings.Limits = settings.Limits.WithDefaults()
	settings.Limits.CPUSeconds = 0 // set per run
	b, _ := json.Marshal(struct {
		Settings  sandbox.Settings
		RunAs     *sandbox.Credential
		Workspace string
		Hidden    []string
		ReadWrite []string
	}{settings, s.RunAs, s.Workspace, s.Hidden, s.ReadWrite})
	return p.interp.Path + "\x00" + string(b)
}

// zygoteGrants maps the read-only paths a run needs onto what its zygote is
// granted: a file in the code dir becomes the code dir (every inline
// snippet lives there), anything else stays as is.
func (w *warmPool) zygoteGrants(paths []string) []string {
	code, ws := codeDir(w.e.cfg.StateDir), w.e.cfg.Workspace
	hidden := hiddenTrees(w.e.cfg.StateDir)
	within := func(p, dir string) bool { return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/") }
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if filepath.Dir(p) == code {
			p = code
		} else if within(p, ws) && !slices.ContainsFunc(hidden, func(h string) bool { return within(p, h) }) {
			continue // every zygote may write the workspace already
		}
		out = append(out, p)
	}
	return out
}

// maxWarmRequest keeps a request within one control message.
const maxWarmRequest = 96 << 10

// maxExtraFiles is how many extra files (fd 3, 4, ...) a warm run can
// inherit (driver.py's _MAX_EXTRA).
const maxExtraFiles = 4

func eligibleVersion(v string) bool {
	return compareVersions(v, "3.8") >= 0
}

// startupVar reports whether the interpreter (or a library it loads at
// startup) reads the variable once at startup, so that a run needing a
// different value cannot reuse an interpreter started with another.
func startupVar(k string) bool {
	switch k {
	case "HOME", "LANG", "LANGUAGE", "GLIBC_TUNABLES", "TZDIR":
		return true
	}
	for _, p := range []string{"PYTHON", "LC_", "LD_", "MALLOC_", "OMP_", "OPENBLAS_", "MKL_"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

func startupEnv(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if startupVar(k) {
			m[k] = v
		}
	}
	return m
}

// sameStartupEnv reports whether env starts Python as the zygote's want
// did. One exception: a PYTHONPATH the zygote was started without, which
// the driver applies to sys.path as startup would (returned for checking).
func sameStartupEnv(want map[string]string, env []string) (ok bool, pythonPath string) {
	n := 0
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if !startupVar(k) {
			continue
		}
		if _, had := want["PYTHONPATH"]; k == "PYTHONPATH" && !had {
			pythonPath = v
			continue
		}
		n++
		if w, ok := want[k]; !ok || w != v {
			return false, ""
		}
	}
	return n == len(want), pythonPath
}

// pythonPathSafe reports whether adding the PYTHONPATH entries to sys.path
// after startup is the same as having them at startup: no entry may hold a
// module the zygote imported at startup (cold, it would have shadowed it) or
// a sitecustomize/usercustomize (site imports those at startup).
func (z *zygote) pythonPathSafe(pythonPath, cwd string, run *sandbox.Spec) bool {
	for _, dir := range filepath.SplitList(pythonPath) {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		if !mayList(run, dir) {
			// The run could not list it: decide nothing from what the
			// server sees there (it names any directory a request likes).
			return false
		}
		fi, err := os.Stat(dir)
		if err != nil {
			continue // nothing there to import at startup
		}
		if !fi.IsDir() {
			return false // a zip archive: not worth listing
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false
		}
		for _, ent := range entries {
			name, _, _ := strings.Cut(ent.Name(), ".")
			if z.modules[name] || name == "sitecustomize" || name == "usercustomize" {
				return false
			}
		}
	}
	return true
}

// mayList reports whether a run confined by spec could list dir: it lies in
// what the run is granted (bound for it when hidden), or its mode bits let
// the run-as user read it.
func mayList(spec *sandbox.Spec, dir string) bool {
	if spec == nil || spec.RunAs == nil {
		return true
	}
	for _, g := range append(append([]string{spec.Workspace, spec.TmpDir}, spec.ReadOnly...), spec.ReadWrite...) {
		if g != "" && workspace.Within(g, filepath.Clean(dir)) {
			return true
		}
	}
	if sandbox.CheckAccess(spec.RunAs, dir, sandbox.AccessRead|sandbox.AccessExec) == nil {
		return true
	}
	// A missing directory holds nothing to import, which the run could
	// see only if it may search the nearest ancestor that exists.
	for p := dir; ; {
		if _, err := os.Lstat(p); err == nil {
			return p != dir && sandbox.CheckAccess(spec.RunAs, p, sandbox.AccessExec) == nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return false
		}
		p = parent
	}
}

// sameHome reports whether env differs from the zygote's startup
// environment in HOME only, in a way startup would not notice: neither home
// holds a .local (the user base, whose site-packages startup would add).
// Confined runs get a HOME of their own (their tmp dir) when the server's is
// out of the run-as user's reach.
func (z *zygote) sameHome(env []string) bool {
	if z.homeHasLocal {
		return false
	}
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == "HOME" {
			_, err := os.Lstat(filepath.Join(v, ".local"))
			return errors.Is(err, fs.ErrNotExist)
		}
	}
	return false
}

func withHome(env []string, home string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		if strings.HasPrefix(kv, "HOME=") {
			kv = "HOME=" + home
		}
		out[i] = kv
	}
	return out
}

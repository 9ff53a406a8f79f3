package uvenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TargetInstall installs requirements into a live session's overlay: a
// directory of its own that its interpreter has on sys.path, layered over
// the (read-only, shared) environment it started in. Nothing of a cached
// environment is written.
type TargetInstall struct {
	// Python is the interpreter the packages are for (the session's).
	Python string
	// Target is the overlay directory (uv pip install --target).
	Target string
	// Writable are the directories the install may write besides its own
	// cache and temp dir: the directory holding Target (the session's own
	// temp dir). The Confiner hands them to the run user.
	Writable []string
	// Requirements are PEP 508 requirements.
	Requirements []string
	// Confine runs uv: always confined (wheels only would be safe as the
	// server, but the target is a directory the session writes).
	Confine Confiner
}

// overlayKey names the overlay installs' temp dirs and lock.
const overlayKey = "overlay"

// InstallTarget installs t's requirements into t.Target with uv, confined
// as the run user, and returns uv's report (its last lines).
func (m *Manager) InstallTarget(ctx context.Context, t TargetInstall) (string, error) {
	if t.Confine == nil {
		return "", errNeedsConfiner
	}
	if len(t.Requirements) == 0 {
		return "", nil
	}
	for _, r := range t.Requirements {
		if _, err := ParseRequirement(r); err != nil {
			return "", fmt.Errorf("requirement %q: %w", r, err)
		}
	}
	if m.uv.path == "" {
		return "", fmt.Errorf("install %s: %w", strings.Join(t.Requirements, ", "), m.uvErr)
	}
	// Held shared while the install runs: cleanTmp removes a .tmp entry
	// only once its key's lock is free (several installs share the key).
	l, err := openLock(m.layout.lock(overlayKey))
	if err != nil {
		return "", err
	}
	defer l.close()
	if err := l.lock(ctx, lockSh); err != nil {
		return "", fmt.Errorf("overlay install: %w", err)
	}
	tmpRoot, err := os.MkdirTemp(m.layout.tmp(), overlayKey+"-")
	if err != nil {
		return "", fmt.Errorf("overlay install: %w", err)
	}
	defer removeAll(tmpRoot)
	if err := os.Chmod(tmpRoot, 0o755); err != nil { // the run user must reach its cache
		return "", fmt.Errorf("overlay install: %w", err)
	}
	cache := filepath.Join(tmpRoot, "cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		return "", fmt.Errorf("overlay install: %w", err)
	}
	p := plan{python: t.Python, index: m.cfg.Index}
	c := Command{Env: m.confinedEnviron(cache), Dir: tmpRoot,
		Writable: append(append([]string(nil), t.Writable...), cache), Readable: m.confinedReadable(p)}
	args := append([]string{"pip", "install", "--target", t.Target, "--python", t.Python}, p.index.args()...)
	args = append(args, t.Requirements...)
	var report strings.Builder
	_, err = m.uv.runConfined(ctx, t.Confine, c, func(phase, detail string) {
		if detail != "" && report.Len() < 4096 {
			report.WriteString(detail + "\n")
		}
	}, args...)
	if err != nil {
		return "", fmt.Errorf("could not install %s: %w", strings.Join(t.Requirements, ", "), err)
	}
	return strings.TrimSpace(report.String()), nil
}

// IndexArgs are uv's index arguments of the server's settings (index URL,
// find-links, no-index, offline), for a uv a session runs itself (its pip
// shim).
func (m *Manager) IndexArgs() []string { return m.cfg.Index.args() }

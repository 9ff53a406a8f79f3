package uvenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// build makes p's env under the key's exclusive lock: another process that
// got there first leaves nothing to do. The env is built aside in .tmp and
// renamed into place, so a reader never sees half an env; it is sealed
// (bytecode compiled, made read-only) in the background (seal.go).
// Afterwards the cache is trimmed to its size cap.
//
// It returns the key the env was published under: p.key, except when a
// project sync rewrote uv.lock (the default mode re-locks an outdated lock,
// as `uv run` does); then the env is published under the key of the new
// lock, which is what every later request computes.
func (m *Manager) build(ctx context.Context, p plan, progress Progress) (string, error) {
	l, err := openLock(m.layout.lock(p.key))
	if err != nil {
		return "", err
	}
	defer l.close()
	if err := l.lock(ctx, lockEx); err != nil {
		return "", fmt.Errorf("environment build: %w", err)
	}
	if _, err := os.Stat(m.layout.manifest(p.key)); err == nil {
		return p.key, nil // built by another process while we waited
	}
	if m.uv.path == "" {
		return "", fmt.Errorf("environment for %s: %w", describe(p), m.uvErr)
	}
	m.builds.Add(1)

	tmpRoot, err := os.MkdirTemp(m.layout.tmp(), p.key+"-")
	if err != nil {
		return "", fmt.Errorf("environment build: %w", err)
	}
	defer removeAll(tmpRoot)
	venv := filepath.Join(tmpRoot, "env")
	man, err := m.install(ctx, p, tmpRoot, venv, progress)
	if err != nil {
		return "", fmt.Errorf("cannot build the environment for %s: %w", describe(p), err)
	}

	key := p.key
	if p.strategy == StrategyProject {
		after, err := m.plan(ctx, p.spec)
		if err != nil {
			return "", fmt.Errorf("environment for %s: after sync: %w", describe(p), err)
		}
		if after.key != p.key {
			// Serialize with builders of the new key, then publish there.
			nl, err := openLock(m.layout.lock(after.key))
			if err != nil {
				return "", err
			}
			defer nl.close()
			if err := nl.lock(ctx, lockEx); err != nil {
				return "", fmt.Errorf("environment build: %w", err)
			}
			key = after.key
		}
	}
	man.Key = key
	if err := writeManifest(venv, man); err != nil {
		return "", err
	}
	if err := m.publish(venv, key); err != nil {
		return "", err
	}
	if err := m.buildFontCache(ctx, p, m.layout.env(key)); err != nil && progress != nil {
		progress(PhaseInstalling, "no matplotlib font cache ("+err.Error()+"): each plotting run scans the fonts itself")
	}
	if man.Sealed {
		// A confined build compiled its bytecode and was made read-only.
		if err := os.Chmod(m.layout.env(key), 0o555); err != nil {
			return "", fmt.Errorf("environment build: %w", err)
		}
	} else {
		m.sealLater(key) // compile bytecode and make read-only, off the first run's path
	}
	if progress != nil {
		progress(PhaseDone, fmt.Sprintf("%d packages: %s", len(man.Resolved), strings.Join(man.Resolved, ", ")))
	}
	if m.maxBytes > 0 {
		if _, err := m.prune(ctx, PruneOptions{MaxBytes: m.maxBytes}, key); err != nil {
			return "", fmt.Errorf("environment cache eviction: %w", err)
		}
	}
	return key, nil
}

// publish renames a finished env into place (the caller holds key's
// exclusive lock). An env already complete there wins (ours is dropped);
// debris without a manifest is replaced.
func (m *Manager) publish(venv, key string) error {
	dest := m.layout.env(key)
	if _, err := os.Stat(m.layout.manifest(key)); err == nil {
		return nil
	}
	if _, err := os.Lstat(dest); err == nil {
		if err := removeAll(dest); err != nil {
			return fmt.Errorf("environment build: remove incomplete %s: %w", dest, err)
		}
	}
	if err := os.Rename(venv, dest); err != nil {
		return fmt.Errorf("environment build: publish: %w", err)
	}
	return nil
}

func describe(p plan) string {
	if p.strategy == StrategyProject {
		return "project " + p.project.Dir
	}
	return strings.Join(p.requirements, ", ")
}

// install creates the venv and installs into it, and describes the result.
// Requirements go the trusted way when they can (wheels only, uv as the
// server); everything that builds from source goes the confined way
// (confine.go).
//
// The venv is --relocatable: it is built in .tmp and renamed, and uv then
// writes entry-point scripts that find their python relative to themselves
// instead of through an absolute shebang to the build path.
func (m *Manager) install(ctx context.Context, p plan, tmpRoot, venv string, progress Progress) (Manifest, error) {
	report := func(phase, detail string) {
		if progress != nil {
			progress(phase, detail)
		}
	}
	if !p.needsConfinement() {
		err := m.installWheels(ctx, p, tmpRoot, venv, progress)
		if err == nil {
			return m.manifest(p, venv, false)
		}
		if !needsBuild(err) {
			return Manifest{}, err
		}
		if err := removeAll(venv); err != nil {
			return Manifest{}, fmt.Errorf("environment build: %w", err)
		}
		report(PhaseDownloading, "some requirements have no wheel: building from source, confined")
	}
	if p.spec.Confine == nil {
		p.spec.Confine = m.cfg.Confine
	}
	if p.spec.Confine == nil {
		return Manifest{}, errNeedsConfiner
	}
	if err := m.installConfined(ctx, p, tmpRoot, venv, progress); err != nil {
		return Manifest{}, err
	}
	if err := adopt(venv); err != nil {
		return Manifest{}, err
	}
	return m.manifest(p, venv, true)
}

// installWheels is the trusted pass: uv as the server, wheels only
// (--no-build: no sdist is built, no package code runs), from / (no
// configuration file a run could have planted is discovered), into the
// shared cache. Bytecode is compiled later, in the background (seal.go).
func (m *Manager) installWheels(ctx context.Context, p plan, tmpRoot, venv string, progress Progress) error {
	if progress != nil {
		progress(PhaseCreating, "creating a virtual environment for Python "+p.pythonVersion)
	}
	if _, err := m.uv.run(ctx, "/", nil, nil, "venv", "--relocatable", "--no-config", "--python", p.python, venv); err != nil {
		return err
	}
	if progress != nil {
		progress(PhaseResolving, "resolving "+strings.Join(p.requirements, ", "))
	}
	args := append([]string{"pip", "install", "--no-build", "--python", VenvPython(venv)}, p.index.args()...)
	args = append(args, p.requirements...)
	_, err := m.uv.run(ctx, "/", nil, progress, args...)
	return err
}

// installConfined is the confined pass: every uv command through the
// plan's Confiner, writing only venv and a private cache and temp dir in
// tmpRoot (which itself stays the server's: files pyexec writes for the
// build, like a constraints file, cannot be replaced by it).
func (m *Manager) installConfined(ctx context.Context, p plan, tmpRoot, venv string, progress Progress) error {
	report := func(phase, detail string) {
		if progress != nil {
			progress(phase, detail)
		}
	}
	cache := filepath.Join(tmpRoot, "cache")
	for _, d := range []string{venv, cache} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("environment build: %w", err)
		}
	}
	if err := os.Chmod(tmpRoot, 0o755); err != nil { // the run user must reach venv and cache
		return fmt.Errorf("environment build: %w", err)
	}
	readable := m.confinedReadable(p)
	if p.spec.WorkspaceRoot != "" {
		readable = append(readable, p.spec.WorkspaceRoot)
	}
	cmd := func(dir string, extraEnv ...string) Command {
		return Command{Env: append(m.confinedEnviron(cache), extraEnv...), Dir: dir,
			Writable: []string{venv, cache}, Readable: readable}
	}
	python := VenvPython(venv)
	idx := p.index.args()

	report(PhaseCreating, "creating a virtual environment for Python "+p.pythonVersion+" (confined)")
	if _, err := m.uv.runConfined(ctx, p.spec.Confine, cmd(venv), nil, "venv", "--relocatable", "--no-config", "--allow-existing", "--python", p.python, venv); err != nil {
		return err
	}
	if p.strategy == StrategyProject {
		report(PhaseResolving, "syncing project "+p.project.Dir+" (confined)")
		args := []string{"sync", "--python", p.python, "--compile-bytecode"}
		switch m.cfg.ProjectSync {
		case SyncLocked:
			args = append(args, "--locked")
		case SyncFrozen:
			args = append(args, "--frozen")
		}
		c := cmd(p.project.Dir, "UV_PROJECT_ENVIRONMENT="+venv)
		// The default mode re-locks an outdated lock, as `uv run` does: it
		// writes uv.lock, in the workspace.
		c.WritesWorkspace = m.cfg.ProjectSync == SyncDefault
		if _, err := m.uv.runConfined(ctx, p.spec.Confine, c, progress, append(args, idx...)...); err != nil {
			return err
		}
	}
	if len(p.requirements) == 0 {
		return nil
	}
	report(PhaseResolving, "resolving "+strings.Join(p.requirements, ", ")+" (confined)")
	args := []string{"pip", "install", "--compile-bytecode", "--python", python}
	c := cmd(venv)
	if p.strategy == StrategyProject {
		// Extra requirements must not move the project's locked versions:
		// pin what the sync installed as constraints.
		out, err := m.uv.runConfined(ctx, p.spec.Confine, cmd(venv), nil, "pip", "freeze", "--python", python)
		if err != nil {
			return err
		}
		constraints := filepath.Join(tmpRoot, "constraints.txt")
		if err := writeNew(constraints, []byte(strings.Join(pinned(freezeLines(out)), "\n")+"\n")); err != nil {
			return fmt.Errorf("write constraints: %w", err)
		}
		c.Readable = append(c.Readable, constraints)
		args = append(args, "--constraint", constraints)
	}
	args = append(append(args, idx...), p.requirements...)
	_, err := m.uv.runConfined(ctx, p.spec.Confine, c, progress, args...)
	return err
}

// writeNew creates path (which must not exist: no symlink is followed) and
// writes data, readable by all.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	return errors.Join(werr, f.Close(), os.Chmod(path, 0o644))
}

// manifest describes the env built from p; a confined build's env is
// sealed already (compiled by the build, read-only after adopt).
func (m *Manager) manifest(p plan, venv string, sealed bool) (Manifest, error) {
	resolved, err := installed(venv)
	if err != nil {
		return Manifest{}, err
	}
	size, err := dirSize(venv)
	if err != nil {
		return Manifest{}, fmt.Errorf("measure env: %w", err)
	}
	return Manifest{
		Key: p.key, Strategy: p.strategy, BasePython: p.python, PythonVersion: p.pythonVersion,
		Requirements: p.requirements, Resolved: resolved, Index: p.index,
		ProjectDir: p.project.Dir, ProjectRoot: p.project.Root,
		Created: m.now().UTC(), SizeBytes: size, Sealed: sealed, Confined: sealed,
	}, nil
}

// writeManifest writes the env's manifest. Whatever a build may have left
// under that name (a symlink, say) is removed first, and the new file is
// created exclusively: nothing is followed.
func writeManifest(venv string, man Manifest) error {
	data, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	path := filepath.Join(venv, manifestName)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := writeNew(path, append(data, '\n')); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// freezeLines keeps the package lines of `uv pip freeze` output.
func freezeLines(out []byte) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines
}

// pinned keeps the name==version lines of a freeze (constraints files
// cannot express editable installs).
func pinned(frozen []string) []string {
	var out []string
	for _, l := range frozen {
		if strings.Contains(l, "==") && !strings.HasPrefix(l, "-") {
			out = append(out, l)
		}
	}
	return out
}

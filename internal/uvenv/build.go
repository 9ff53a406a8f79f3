package uvenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	m.sealLater(key) // compile bytecode and make read-only, off the first run's path
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
//
// The venv is --relocatable: it is built in .tmp and renamed, and uv then
// writes entry-point scripts that find their python relative to themselves
// instead of through an absolute shebang to the build path. Bytecode is
// compiled now, since the env is read-only for runs and would otherwise pay
// compilation on every import.
func (m *Manager) install(ctx context.Context, p plan, tmpRoot, venv string, progress Progress) (Manifest, error) {
	report := func(phase, detail string) {
		if progress != nil {
			progress(phase, detail)
		}
	}
	report(PhaseCreating, "creating a virtual environment for Python "+p.pythonVersion)
	if _, err := m.uv.run(ctx, tmpRoot, nil, nil, "venv", "--relocatable", "--no-config", "--python", p.python, venv); err != nil {
		return Manifest{}, err
	}
	python := VenvPython(venv)
	idx := p.index.args()

	if p.strategy == StrategyProject {
		report(PhaseResolving, "syncing project "+p.project.Dir)
		args := []string{"sync", "--python", p.python}
		switch m.cfg.ProjectSync {
		case SyncLocked:
			args = append(args, "--locked")
		case SyncFrozen:
			args = append(args, "--frozen")
		}
		args = append(args, idx...)
		if _, err := m.uv.run(ctx, p.project.Dir, []string{"UV_PROJECT_ENVIRONMENT=" + venv}, progress, args...); err != nil {
			return Manifest{}, err
		}
	}
	if len(p.requirements) > 0 {
		report(PhaseResolving, "resolving "+strings.Join(p.requirements, ", "))
		args := []string{"pip", "install", "--python", python}
		if p.strategy == StrategyProject {
			// Extra requirements must not move the project's locked versions:
			// pin what the sync installed as constraints.
			frozen, err := m.freeze(ctx, python)
			if err != nil {
				return Manifest{}, err
			}
			constraints := filepath.Join(tmpRoot, "constraints.txt")
			if err := os.WriteFile(constraints, []byte(strings.Join(pinned(frozen), "\n")+"\n"), 0o644); err != nil {
				return Manifest{}, fmt.Errorf("write constraints: %w", err)
			}
			args = append(args, "--constraint", constraints)
		}
		args = append(append(args, idx...), p.requirements...)
		if _, err := m.uv.run(ctx, tmpRoot, nil, progress, args...); err != nil {
			return Manifest{}, err
		}
	}
	resolved, err := installed(venv)
	if err != nil {
		return Manifest{}, err
	}
	size, err := dirSize(venv)
	if err != nil {
		return Manifest{}, fmt.Errorf("measure env: %w", err)
	}
	man := Manifest{
		Key: p.key, Strategy: p.strategy, BasePython: p.python, PythonVersion: p.pythonVersion,
		Requirements: p.requirements, Resolved: resolved, Index: p.index,
		ProjectDir: p.project.Dir, ProjectRoot: p.project.Root,
		Created: m.now().UTC(), SizeBytes: size,
	}
	return man, nil
}

func writeManifest(venv string, man Manifest) error {
	data, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(venv, manifestName), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// freeze lists what is installed in the env, one "name==version" per
// package (editable and URL installs as uv prints them).
func (m *Manager) freeze(ctx context.Context, python string) ([]string, error) {
	out, err := m.uv.run(ctx, filepath.Dir(python), nil, nil, "pip", "freeze", "--python", python)
	if err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines, nil
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

package uvenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// sealTimeout bounds the background bytecode compilation of one env.
const sealTimeout = 10 * time.Minute

// Sealing: an env is published as soon as its packages are installed, so
// the first run does not wait for bytecode compilation (which costs more
// than resolving and installing small packages). Then, in the background,
// its bytecode is compiled (runs cannot write __pycache__ into a read-only
// env, so without it every import would compile in memory on every run) and
// it is made read-only; the manifest records that it is sealed.
//
// Until it is sealed, the env is writable by the server's uid only. That is
// no weaker than a sealed env: mode bits never stop a run that executes as
// the server's uid (it could chmod them back), and runs under another uid
// (the sandbox's run-as user) cannot write files owned by the server either
// way.

// sealLater seals key's env in the background unless that is already under
// way in this process.
func (m *Manager) sealLater(key string) {
	m.mu.Lock()
	if m.sealing[key] {
		m.mu.Unlock()
		return
	}
	m.sealing[key] = true
	m.mu.Unlock()
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.sealing, key)
			m.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), sealTimeout)
		defer cancel()
		if err := m.seal(ctx, key); err != nil {
			m.sealErrors.Add(1)
			return
		}
		// Envs that were being sealed could not be evicted when this one
		// was built, and sizes now include bytecode: enforce the cap again.
		if m.maxBytes > 0 {
			_, _ = m.prune(ctx, PruneOptions{MaxBytes: m.maxBytes}, key)
		}
	}()
}

// Wait blocks until background work (sealing envs) has finished. Servers
// call it on shutdown; tests call it before inspecting an env.
func (m *Manager) Wait() { m.bg.Wait() }

func (m *Manager) seal(ctx context.Context, key string) error {
	// A shared lock: runs may use the env meanwhile, eviction may not.
	l, err := openLock(m.layout.lock(key))
	if err != nil {
		return err
	}
	defer l.close()
	if err := l.lock(ctx, lockSh); err != nil {
		return fmt.Errorf("seal %s: %w", key, err)
	}
	man, err := readManifest(m.layout.manifest(key))
	if err != nil {
		return fmt.Errorf("seal %s: %w", key, err)
	}
	if man.Sealed {
		return nil
	}
	dir := m.layout.env(key)
	sites, _ := filepath.Glob(filepath.Join(dir, "lib", "python*", "site-packages"))
	if len(sites) > 0 {
		// One worker at low priority: the first runs of this env are
		// probably going on right now and should get the CPU. -S: no
		// site, so no .pth file of an installed wheel runs (with the
		// server's rights); only files are compiled, none executed. Envs
		// a confined build made are never sealed here (they compiled
		// themselves).
		if man.Confined {
			return fmt.Errorf("seal %s: a confined build's env is not compiled by the server", key)
		}
		cmd := exec.CommandContext(ctx, VenvPython(dir), append([]string{"-I", "-S", "-m", "compileall", "-q", "-j", "1"}, sites...)...)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("seal %s: compile bytecode: %w", key, err)
		}
		lowerPriority(cmd.Process.Pid)
		// A file that does not compile (a test fixture with a syntax error
		// shipped in a wheel, say) makes compileall exit 1; the rest is
		// compiled, which is all that matters.
		_ = cmd.Wait()
	}
	if man.SizeBytes, err = dirSize(dir); err != nil {
		return fmt.Errorf("seal %s: %w", key, err)
	}
	man.Sealed = true
	if err := os.Chmod(dir, 0o755); err != nil { // envs sealed by an older build are 0555
		return fmt.Errorf("seal %s: %w", key, err)
	}
	if err := replaceManifest(dir, man); err != nil {
		return fmt.Errorf("seal %s: %w", key, err)
	}
	if err := makeReadOnly(dir); err != nil {
		return fmt.Errorf("seal %s: make read-only: %w", key, err)
	}
	return os.Chmod(dir, 0o555)
}

// replaceManifest rewrites an env's manifest atomically (readers never see
// a partial file, and a read-only old manifest is simply replaced).
func replaceManifest(dir string, man Manifest) error {
	tmp, err := os.MkdirTemp(dir, ".manifest-")
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := writeManifest(tmp, man); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(tmp, manifestName), filepath.Join(dir, manifestName)); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

package uvenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Why a font cache per environment: matplotlib scans the system's fonts
// and writes fontlist-vNNN.json into its config dir the first time it
// draws text. A run's config dir is fresh (in its private temp dir), so
// every run that plots paid that scan: seconds. So when an environment
// with matplotlib is built, the font list is made once, confined like a
// build (as the run user, writing only the cache dir), then taken over by
// the server (adopt: read-only, nothing followed). The server never reads
// it: a run that imports matplotlib copies it into its own config dir
// (pyrt's pyexec_rt.py), so nothing a run wrote is ever trusted by the
// server, and no run can change what the next run gets.

// FontCacheDirName is where in an environment the matplotlib font cache is
// kept (pyexec_rt.py looks for it under sys.prefix).
const FontCacheDirName = ".pyexec-mpl"

// fontCacheTimeout bounds the font scan.
const fontCacheTimeout = 2 * time.Minute

// buildFontCache makes env's font cache when env has matplotlib and a
// Confiner is at hand (without one there is none: runs scan the fonts
// themselves, as before). A failure leaves no cache, and is only a cost.
func (m *Manager) buildFontCache(ctx context.Context, p plan, env string) error {
	confine := p.spec.Confine
	if confine == nil {
		confine = m.cfg.Confine
	}
	if confine == nil || !hasMatplotlib(env) {
		return nil
	}
	dir := filepath.Join(env, FontCacheDirName)
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("font cache: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, fontCacheTimeout)
	defer cancel()
	var out bytes.Buffer
	code, err := confine(ctx, Command{
		Argv: []string{VenvPython(env), "-I", "-c", "import matplotlib.font_manager as f; f.fontManager"},
		Env: []string{"LANG=C.UTF-8", "MPLCONFIGDIR=" + dir, "MPLBACKEND=Agg", "HOME=" + dir,
			"PYTHONDONTWRITEBYTECODE=1", "PATH=/usr/local/bin:/usr/bin:/bin"},
		Dir: dir, Writable: []string{dir}, Readable: append(m.confinedReadable(p), env),
		Stdout: &out, Stderr: &out,
	})
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d: %s", code, bytes.TrimSpace(out.Bytes()))
	}
	if aerr := adopt(dir); aerr != nil && err == nil {
		err = aerr
	}
	if err != nil {
		removeAll(dir)
		return fmt.Errorf("font cache: %w", err)
	}
	return os.Chmod(dir, 0o555)
}

// hasMatplotlib tells whether env has matplotlib installed.
func hasMatplotlib(env string) bool {
	for _, pattern := range []string{"lib/python*/site-packages/matplotlib/__init__.py", "Lib/site-packages/matplotlib/__init__.py"} {
		if m, _ := filepath.Glob(filepath.Join(env, pattern)); len(m) > 0 {
			return true
		}
	}
	return false
}

// Package realpkg prepares tests that install real packages (ruff, the
// MCP SDKs) from the package registry: one uv cache shared by every test
// and every test run on the machine, so a package is downloaded once and
// later runs work from the cache.
package realpkg

import (
	"os"
	"path/filepath"
	"testing"
)

// CacheEnv is the variable naming the shared cache (CI sets it to a
// directory it keeps between runs).
const CacheEnv = "PYEXEC_TEST_UV_CACHE"

// CacheDir returns the shared uv cache directory, creating it.
func CacheDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(CacheEnv)
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "pyexec-test", "uv")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// UseSharedCache points uv (as every pyexec component runs it: they read
// UV_CACHE_DIR from the environment) at the shared cache for this test.
// Tests using it cannot run in parallel with tests that set the
// environment too.
func UseSharedCache(t *testing.T) {
	t.Helper()
	t.Setenv("UV_CACHE_DIR", CacheDir(t))
}

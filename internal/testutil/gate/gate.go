// Package gate gives tests a file path that a running script can wait for,
// so a test decides when a run may proceed without sleeping.
package gate

import (
	"os"
	"path/filepath"
	"testing"
)

// Path returns where a test creates the file a running script waits for.
// Not under t.TempDir: its 0700 parent is not searchable by a run executing
// as nobody (and is hidden behind a tmpfs in the run's mount namespace when
// the workspace lives below it).
func Path(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pyexec-gate-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "gate")
}

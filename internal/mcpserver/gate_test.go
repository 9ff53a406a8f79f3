package mcpserver

import (
	"os"
	"path/filepath"
	"testing"
)

// gatePath is where a test creates a file a running script waits for. Not
// under t.TempDir: its 0700 parent is not searchable by a run executing as
// nobody (and is hidden behind a tmpfs in the run's mount namespace when
// the workspace lives below it).
func gatePath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pyexec-gate-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "gate")
}

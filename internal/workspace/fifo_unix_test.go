//go:build !windows

package workspace

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO in place of the file is refused at once, not waited on.
func TestOpenRefusesFIFOWithoutBlocking(t *testing.T) {
	r, ws := newRoot(t)
	fifo := filepath.Join(ws, ".env")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() { _, err := r.ReadFile(fifo, ServerRights, 0); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("opening a FIFO blocked")
	}
}

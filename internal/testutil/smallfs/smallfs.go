// Package smallfs gives tests a real filesystem that can be filled up: a
// tmpfs of a few megabytes mounted on a temp dir (root only; tests skip
// otherwise). A full state dir is tested on it, not simulated.
package smallfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Fill writes a file under dir until the filesystem has no space left and
// returns a function that removes it again.
func Fill(t testing.TB, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	// Smaller writes take the last partial pages.
	for _, n := range []int{4096, 512, 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	f.Close()
	return func() {
		if err := os.Remove(path); err != nil {
			t.Errorf("free %s: %v", dir, err)
		}
	}
}

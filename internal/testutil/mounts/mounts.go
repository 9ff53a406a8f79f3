// Package mounts lets a test wait for the filesystems a pyexec server
// mounted beneath its state dir (the runs' temp dirs) to be gone. A server
// killed with SIGKILL leaves that to its unmount watcher, which may finish
// a moment after the test has seen the server die; the test's TempDir
// cleanup must not race it.
package mounts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Under lists the mount points at or beneath dir.
func Under(dir string) []string {
	dir = filepath.Clean(dir)
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if p := f[4]; p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

// CleanupWaitsFor registers a cleanup, to run before dir's own removal
// when dir is a t.TempDir made earlier, that waits until nothing is
// mounted beneath dir and fails the test if something stays.
func CleanupWaitsFor(t testing.TB, dir string) {
	t.Cleanup(func() { WaitGone(t, dir) })
}

// WaitGone waits until nothing is mounted beneath dir, and fails the test
// if something stays 30 s (the server is gone; only its watcher is left to
// unmount, so there is no event to wait on).
func WaitGone(t testing.TB, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(Under(dir)) > 0 {
		if time.Now().After(deadline) {
			t.Errorf("still mounted 30 s after the server ended: %v", Under(dir))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

//go:build !linux

package smallfs

import "testing"

// Mount skips the test: a small tmpfs is a Linux facility.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	t.Skip("a small tmpfs to fill needs Linux")
	return ""
}

package mcpserver

import (
	"github.com/pyexec/pyexec/internal/testutil/proc"
	"testing"
	"time"
)

// waitGone polls until pid no longer exists. The server kills a cancelled
// run asynchronously, after the client has already returned, so there is no
// event to wait on from the client side.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !proc.Gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive 15 s after its call was cancelled", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

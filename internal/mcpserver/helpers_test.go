package mcpserver

import (
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/testutil/proc"
)

// waitGone polls until no process of the run marked with mark is left (a
// run's pids are its own PID namespace's; see procs). The server kills a
// cancelled run asynchronously, after the client has already returned, so
// there is no event to wait on from the client side.
func waitGone(t *testing.T, mark string) {
	t.Helper()
	proc.WaitGone(t, mark, 15*time.Second)
}

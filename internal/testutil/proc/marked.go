package proc

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A confined run on Linux has a PID namespace of its own, so the pids it
// prints mean nothing outside it. A test that must find a run's processes
// from the server's side marks them instead: the run starts a child whose
// command line carries a unique string (Sleeper), and Marked finds it.

var seq atomic.Int64

// Mark returns a string unique to this test process and call.
func Mark(t testing.TB) string {
	return fmt.Sprintf("pyexec-mark-%d-%d-%s", os.Getpid(), seq.Add(1), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
}

// Sleeper returns Python statements that start a child sleeping for an
// hour whose command line carries mark, and return once it runs. Put them
// first in a run's code: the run's tree then holds a process Marked finds.
func Sleeper(mark string) string {
	return fmt.Sprintf("import subprocess as _pyexec_sp, sys as _pyexec_sys\n_pyexec_sp.Popen([_pyexec_sys.executable, '-c', 'import time; time.sleep(3600)', %q])\n", mark)
}

// Marked lists live processes whose command line holds mark.
func Marked(mark string) []int { return marked(mark) }

// WaitGone polls until no process carries mark, failing after within. The
// server may end a cancelled run after the client has returned, so there is
// no event to wait on from the client's side.
func WaitGone(t testing.TB, mark string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(Marked(mark)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the run still alive %v after it was cancelled", Marked(mark), within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

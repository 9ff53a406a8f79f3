package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/testutil/hostile"
)

// sessionCorpusOutcome is how a corpus case ends when its script runs as a
// cell, where a run's exit code, timeout and limit mean something else: a
// session outlives its cells, so what ends a run ends either the cell (an
// exception, an interrupt) or the whole session (a kernel kill of the
// interpreter, a cell that would not stop). Cases not listed must end
// their cell without error (the run's exit_code 0).
type sessionCorpusOutcome struct {
	// lost is the session's lost_reason: the session must end during the
	// cell, for this reason (the server's kill reason, else the kernel's
	// evidence: the first cases of the session manager's lostReason).
	lost string
	// cellLimit is the limit the cell's exception names
	// (CellResult.LimitExceeded); the session lives on.
	cellLimit string
	// interrupted: the cell timed out and KeyboardInterrupt stopped it.
	interrupted bool
	// why says how the run's expectation maps to this one.
	why string
}

// sessionCorpus maps the run expectations of testdata/hostile/expected.json
// to the session's. The security expectations (stdout, udp_received, no
// leftovers once the session is closed) hold unchanged for every case.
var sessionCorpus = map[string]sessionCorpusOutcome{
	"fork_bomb": {lost: "processes", why: "timed_out + processes: the cell's forks fill the session's process limit and " +
		"keep it full after the interrupt (or the interrupt is not heeded), so the session is lost with reason processes; " +
		"should the bomb's processes all end with the interrupt, the session may live on, back to its one process"},
	"memory_bomb":           {lost: "memory", why: "exit -9 + memory: the cgroup OOM-kills the interpreter, the session is lost with reason memory"},
	"infinite_loop_timeout": {interrupted: true, why: "timed_out: KeyboardInterrupt stops the loop, the namespace is kept"},
	"infinite_loop_cpu_limit": {lost: "cpu", why: "exit -24 + cpu: RLIMIT_CPU counts the session's whole life; SIGXCPU kills " +
		"the interpreter, the session is lost with reason cpu"},
	"disk_filler": {cellLimit: "file_size", why: "exit 1 + file_size: the write fails with EFBIG, an exception: the cell's error names the limit"},
}

// TestSessionHostileCorpus runs every case of the hostile corpus as the one
// cell of a fresh session started with the case's policy, network and
// limits (the script as __main__, its args in sys.argv), while a bystander
// session holds a variable. After each case the session is closed, and then
// nothing of it is left, the bystander still has its variable and the
// server still runs a plain run.
func TestSessionHostileCorpus(t *testing.T) {
	h := newHostileSetup(t)
	ctx := context.Background()
	const grace = time.Second
	bystander := startSession(t, h.eng, Request{})
	cell(t, bystander, 1, "v = 'alive'")
	bystanderCells := 1

	for _, c := range h.cases {
		t.Run(c.Name, func(t *testing.T) {
			want := sessionCorpus[c.Name]
			req := h.request(t, c)
			script := filepath.Join(h.ws, c.Script)
			argv, _ := json.Marshal(append([]string{script}, req.Args...))
			code := "import runpy, sys\nsys.argv = " + string(argv) + "\nrunpy.run_path(sys.argv[0], run_name='__main__')\n"

			sp, err := h.eng.StartSession(ctx, req, time.Hour)
			if err != nil {
				t.Fatalf("StartSession: %v", err)
			}
			pidsDir := processCgroup(sp.PID(), "pids")
			res, runErr := sp.RunCell(ctx, 1, code, time.Duration(c.Timeout*float64(time.Second)), grace, nil)
			procs := cgroupProcs(pidsDir)
			if c.Script == "daemon.py" && len(procs) < 2 {
				t.Errorf("the daemon is not in the session's cgroup while it lives: %v", procs)
			}
			lost := errors.Is(runErr, ErrSessionEnded)
			if runErr != nil && !lost {
				t.Fatalf("RunCell: %v", runErr)
			}
			reason := ""
			if lost {
				kill, final, err := sp.End()
				reason = kill
				if reason == "" {
					reason = final.LimitExceeded
				}
				if reason == "" {
					reason = "exit " + strconv.Itoa(final.ExitCode) + " " + errString(err)
				}
			}
			sp.Kill("closed")
			<-sp.Done()

			ename := ""
			if res.Error != nil {
				ename = res.Error.Ename
			}
			out := hostile.Outcome{Stdout: res.Stdout, Stderr: res.Stderr, StdoutTruncated: res.StdoutTruncated, StdoutBytes: res.StdoutBytes,
				Extra: "lost=" + reason + " cell_error=" + ename + " cell_limit=" + res.LimitExceeded + " interrupted=" + strconv.FormatBool(res.Interrupted) + " sandbox=" + res.Sandbox}
			if res.Error != nil {
				out.Stderr += res.Error.Traceback // a run would have printed it
				if strings.Contains(res.Error.Traceback, h.state) {
					t.Errorf("the cell's traceback shows the session driver: %s", res.Error.Traceback)
				}
			}
			switch {
			case want.lost == "processes" && !lost && res.Interrupted && res.LimitExceeded == "processes":
				// The bomb's processes died with the interrupt: the
				// session is usable, and must be back to its own process.
				if n := len(procs); n > 1 {
					t.Errorf("a fork bomb left %d processes in a live session: %s", n, out)
				}
			case want.lost != "":
				if reason != want.lost {
					t.Errorf("session lost with reason %q, want %q (%s): %s", reason, want.lost, want.why, out)
				}
			case lost:
				t.Errorf("session lost (%s), want it alive: %s", reason, out)
			case want.interrupted:
				if !res.TimedOut || !res.Interrupted {
					t.Errorf("cell not interrupted by its timeout (%s): %s", want.why, out)
				}
			case want.cellLimit != "":
				if res.Error == nil || res.LimitExceeded != want.cellLimit {
					t.Errorf("cell limit %q, want %q (%s): %s", res.LimitExceeded, want.cellLimit, want.why, out)
				}
			case res.Error != nil || res.TimedOut:
				t.Errorf("cell did not end cleanly: %s", out)
			}
			if !strings.Contains(res.Sandbox, "uid 65534") {
				t.Errorf("session did not run as nobody: %s", out)
			}
			// The security expectations hold unchanged; the run's exit
			// code, timeout and limit were mapped above.
			exp := c.Expect
			exp.ExitCode, exp.TimedOut, exp.LimitExceeded = nil, nil, ""
			exp.Check(t, out, h.listeners)

			// Closed, nothing of the session is left: no process of its
			// cgroup (daemons included), no cgroup, no temp dir.
			for _, pid := range procs {
				if _, err := os.Stat("/proc/" + pid); err == nil && processCgroup(mustAtoi(pid), "pids") == pidsDir {
					t.Errorf("process %s of the session outlived it", pid)
				}
			}
			assertNothingLeft(t, h.eng, h.ws, h.state, bystander.prep.tmpDir)

			bystanderCells++
			if r := cell(t, bystander, bystanderCells, "v"); r.Result == nil || *r.Result != "'alive'" {
				t.Errorf("bystander after %s: %+v", c.Name, r)
			}
			if r := run(t, h.eng, Request{Code: "print('still here')"}); strings.TrimSpace(r.Stdout) != "still here" {
				t.Errorf("plain run after %s: %+v", c.Name, r)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// cgroupProcs lists the processes in a cgroup directory.
func cgroupProcs(dir string) []string {
	if dir == "" {
		return nil
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return strings.Fields(string(raw))
}

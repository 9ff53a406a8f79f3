package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/testutil/hostile"
)

func TestHostileCorpus(t *testing.T) {
	needPython(t)
	dir, cases := hostile.Load(t)
	h := hostile.NewListeners(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			runHostile(t, dir, c, h)
		})
	}
}

// TestHostileConcurrent runs a fork bomb, a memory bomb and a daemon at the
// same time: none may disturb the others or leave anything behind.
func TestHostileConcurrent(t *testing.T) {
	needPython(t)
	dir, cases := hostile.Load(t)
	h := hostile.NewListeners(t)
	want := map[string]bool{"fork_bomb": true, "memory_bomb": true, "daemon_strict": true, "write_outside_workspace": true}
	var wg sync.WaitGroup
	for _, c := range cases {
		if !want[c.Name] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(c.Name, func(t *testing.T) { runHostile(t, dir, c, h) })
		}()
	}
	wg.Wait()
}

func runHostile(t *testing.T, dir string, c hostile.Case, h *hostile.Listeners) {
	e := newEnv(t)
	src, err := os.ReadFile(filepath.Join(dir, c.Script))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(e.ws, c.Script)
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{python, "-S", script}, h.Args(c, e.outside, e.secret)...)
	spec := e.spec(Policy(c.Policy))
	spec.Network = Network(c.Network)
	spec.Limits = Limits{} // the case's own limits only, as the corpus states them
	if len(c.Limits) > 0 {
		if err := json.Unmarshal(c.Limits, &spec.Limits); err != nil {
			t.Fatal(err)
		}
	}
	timeout := time.Duration(c.Timeout * float64(time.Second))
	res := sandboxedT(t, spec, timeout+30*time.Second, timeout, argv...)
	if res.StartErr != "" {
		t.Fatalf("start: %s", res.StartErr)
	}
	c.Expect.Check(t, hostile.Outcome{
		ExitCode: res.Exit, TimedOut: res.TimedOut, LimitExceeded: LimitFromStderr(res.Report, res.Stderr, res.Exit),
		Stdout: res.Stdout, Stderr: res.Stderr, StdoutTruncated: res.StdoutTruncated, StdoutBytes: res.StdoutBytes,
	}, h)
	if c.Expect.NoLeftovers {
		if left := procsMentioning(e.ws); len(left) > 0 {
			t.Errorf("processes outlived the run: %v", left)
		}
		// Exact run id: concurrent runs of this test may still be going.
		noCgroupLeftFor(t, res.RunID)
	}
}

// procsMentioning lists live processes whose command line contains s.
func procsMentioning(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(cmd), s) {
			out = append(out, pid)
		}
	}
	return out
}

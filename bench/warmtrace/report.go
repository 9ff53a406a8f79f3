package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// stamp is one timestamp of one run.
type stamp struct {
	label string
	ns    int64
}

// readTrace splits the trace into runs, each starting at its go.run, with
// its stamps in time order (the fork server's arrive late, by the status
// channel, with the times they were taken).
func readTrace(path string) ([][]stamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("no trace (did the benchmark run warm?): %w", err)
	}
	defer f.Close()
	var runs [][]stamp
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			continue
		}
		ns, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if fields[1] == "go.run" {
			runs = append(runs, nil)
		}
		if len(runs) > 0 {
			runs[len(runs)-1] = append(runs[len(runs)-1], stamp{fields[1], ns})
		}
	}
	for _, r := range runs {
		slices.SortStableFunc(r, func(a, b stamp) int { return int(a.ns - b.ns) })
	}
	return runs, sc.Err()
}

// A phase is the span between two stamps of the same run.
type phase struct {
	from, to, what string
	sub            bool // part of the row above
}

// phases are what one warm run's time goes to, in order along its path;
// the last ones happen off it (between runs) and say whether G was ready
// when the request came.
var phases = []phase{
	{"go.run", "go.send", "server: the request up to the RUN message sent to the fork server", false},
	{"go.run", "go.prepared", "checks, code file, temp dir, sandbox spec, environment (Engine.prepare)", true},
	{"go.prepared", "go.acquired", "pipes, picking the fork server", true},
	{"go.acquired", "go.boxed", "the run's cgroup and Landlock ruleset (sandbox.Warm.Prepare)", true},
	{"go.send", "py.g.recv", "handoff: until G has the request (includes waiting for G to be ready)", false},
	{"py.g.recv", "py.g.confined", "G joins the cgroup, sets RLIMIT_CPU, stacks the Landlock layer, tells S", false},
	{"py.g.confined", "py.g.exec", "G becomes the run: cwd, stdio, environment, sys.argv/path, __main__", false},
	{"py.g.exec", "py.g.execd", "the run's own code: compile and exec print(1)", false},
	{"py.g.execd", "py.g.exit", "finalize: threads, atexit, imports report, teardown, flush", false},
	{"py.g.exit", "py.s.reaped", "G's exit (the kernel frees its address space) until S has reaped it", false},
	{"py.s.reaped", "go.exitev", "S reports the exit (rusage) on the status channel", false},
	{"go.exitev", "go.return", "server: cgroup evidence, release, result", false},
	{"go.run", "go.return", "total, one warm run (Engine.Run)", false},
	{"py.s.fork", "py.g.born", "off the path: S forks the next G (from the last run's exit on)", false},
	{"py.g.born", "py.g.ready", "off the path: G rehearses and clears the zygote's environment", false},
	{"py.g.ready", "go.send", "G ready this long before the request (negative: the request waited)", false},
}

func report(w io.Writer, runs [][]stamp) {
	fmt.Fprintln(w, "| phase | median | p90 | runs |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, ph := range phases {
		var ms []float64
		for _, r := range runs {
			a, okA := first(r, ph.from)
			b, okB := first(r, ph.to)
			if okA && okB {
				ms = append(ms, float64(b-a)/1e6)
			}
		}
		if len(ms) == 0 {
			continue
		}
		slices.Sort(ms)
		name := ph.what
		if ph.sub {
			name = "&nbsp;&nbsp;of which " + name
		}
		fmt.Fprintf(w, "| %s | %.3f ms | %.3f ms | %d |\n", name, ms[len(ms)/2], ms[len(ms)*9/10], len(ms))
	}
}

func first(r []stamp, label string) (int64, bool) {
	for _, s := range r {
		if s.label == label {
			return s.ns, true
		}
	}
	return 0, false
}

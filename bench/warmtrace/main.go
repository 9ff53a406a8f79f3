// Command warmtrace breaks one warm run (print(1) on a fork server, default
// sandbox) down into its phases, server and fork server alike, with
// CLOCK_MONOTONIC timestamps taken at each phase boundary.
//
//	go run ./bench/warmtrace                      # from the module root
//	go run ./bench/warmtrace -n 500 -python /root/bench/clean/bin/python
//
// The timestamps are not in pyexec: warmtrace copies the module's files
// (as checked out, edits included) to a temp dir, inserts them there
// (instrument.go), builds internal/engine's test binary from the copy and
// runs its BenchmarkWarmRun with the trace on. The fork server sends its
// stamps over the run's own status channel, so no extra descriptor or file
// is visible to the run. Only medians of the last -n runs of the warm pass
// are reported; the stamps themselves cost a few microseconds each.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	n := flag.Int("n", 300, "runs to measure (after 20 to settle)")
	python := flag.String("python", "", "interpreter of the fork server (default: the server's default; a fresh venv's is the clean baseline)")
	keep := flag.Bool("keep", false, "keep the instrumented copy and the raw trace")
	rev := flag.String("rev", "", "measure this git revision (e.g. main) instead of the files as checked out")
	flag.Parse()
	if err := run(context.Background(), *n, *python, *rev, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "warmtrace:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int, python, rev string, keep bool) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "warmtrace-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(os.Stderr, "instrumented copy and trace in", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	src := filepath.Join(tmp, "src")
	if rev != "" {
		err = extractRev(ctx, root, rev, src)
	} else {
		err = copyModule(ctx, root, src)
	}
	if err != nil {
		return fmt.Errorf("copy module: %w", err)
	}
	if err := instrument(src); err != nil {
		return fmt.Errorf("instrument: %w", err)
	}
	bin := filepath.Join(tmp, "engine.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./internal/engine")
	build.Dir, build.Stdout, build.Stderr = src, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build the instrumented engine tests: %w", err)
	}
	trace := filepath.Join(tmp, "trace.txt")
	bench := exec.CommandContext(ctx, bin, "-test.run", "XXX", "-test.bench", "BenchmarkWarmRun$", "-test.benchtime", strconv.Itoa(n)+"x")
	bench.Dir = filepath.Join(src, "internal", "engine")
	bench.Env = append(os.Environ(), "PYEXEC_TRACE="+trace, "PYEXEC_BENCH_PYTHON="+python)
	out, err := bench.CombinedOutput()
	if err != nil {
		return fmt.Errorf("benchmark: %w\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "BenchmarkWarmRun") {
			fmt.Println("#", strings.Join(strings.Fields(line), " "))
		}
	}
	runs, err := readTrace(trace)
	if err != nil {
		return err
	}
	if len(runs) > n {
		runs = runs[len(runs)-n:] // the warm pass's, after its settling runs
	}
	load, _ := os.ReadFile("/proc/loadavg")
	what := "the checked-out files"
	if rev != "" {
		what = "revision " + rev
	}
	fmt.Printf("# %s: %d runs, python %q, load average %s\n\n", what, len(runs), python, strings.Join(strings.Fields(string(load))[:3], " "))
	report(os.Stdout, runs)
	return floor(ctx, os.Stdout, python)
}

// moduleRoot is the directory of go.mod, found from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory: run it from the module")
		}
		dir = parent
	}
}

// extractRev writes the tree of git revision rev to dst.
func extractRev(ctx context.Context, root, rev, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", rev, dst)
	archive.Dir, archive.Stderr = root, os.Stderr
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s: %w", rev, err)
	}
	return nil
}

// copyModule copies the files git knows of (as they are on disk) to dst.
func copyModule(ctx context.Context, root, dst string) error {
	ls := exec.CommandContext(ctx, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	out, err := ls.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

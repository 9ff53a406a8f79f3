package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// floorScript measures, in the interpreter itself, what no fork server can
// avoid: forking a process of the interpreter's size (until the child
// runs), that child's exit until the parent has reaped it, and the cost of
// one page fault (every page a forked run writes is copied on a fault).
const floorScript = `
import gc, mmap, os, statistics, time
gc.collect(); gc.freeze()
r, w = os.pipe()
fork, exit_ = [], []
for _ in range(300):
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.write(w, b"x")
        os._exit(0)
    os.read(r, 1)
    t1 = time.perf_counter()
    os.waitpid(pid, 0)
    t2 = time.perf_counter()
    fork.append(t1 - t0)
    exit_.append(t2 - t1)
pages = 20000
m = mmap.mmap(-1, pages * 4096)
t0 = time.perf_counter()
for i in range(0, pages * 4096, 4096):
    m[i] = 1
fault = (time.perf_counter() - t0) / pages
anon = 0
for line in open("/proc/self/smaps_rollup"):
    if line.startswith("Anonymous:"):
        anon = int(line.split()[1])
print("%.3f %.3f %.2f %d" % (statistics.median(fork) * 1e3, statistics.median(exit_) * 1e3, fault * 1e6, anon))
`

// floor runs floorScript with python ("" means python3 on PATH) and
// reports its figures.
func floor(ctx context.Context, w io.Writer, python string) error {
	if python == "" {
		python = "python3"
	}
	out, err := exec.CommandContext(ctx, python, "-c", floorScript).Output()
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	var fork, exit, fault float64
	var anon int
	if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &fork, &exit, &fault, &anon); err != nil {
		return fmt.Errorf("floor: %q: %w", out, err)
	}
	fmt.Fprintf(w, "\nThe floor, in the same interpreter (%s, %d kB anonymous memory after start):\n\n", python, anon)
	fmt.Fprintln(w, "| what | median |")
	fmt.Fprintln(w, "|---|---:|")
	fmt.Fprintf(w, "| fork, until the child runs | %.3f ms |\n", fork)
	fmt.Fprintf(w, "| the child's exit, until the parent has reaped it | %.3f ms |\n", exit)
	fmt.Fprintf(w, "| one page fault (touching a fresh anonymous page) | %.2f µs |\n", fault)
	return nil
}

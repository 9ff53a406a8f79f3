// Command pybench measures pyexec against starting Python directly and
// against the simplest MCP server a user could run instead, in one run on
// one machine, and prints a markdown table with every row as a ratio to two
// baselines measured in the same run: (a) a clean interpreter's
// `python -c pass` (a fresh venv of the default interpreter: no
// site-packages .pth files; the headline) and (a0) the default
// interpreter's own.
//
//	go run ./bench/pybench            # from the module root
//	go run ./bench/pybench -n 500 -heavy sympy
//
// The peer row (p) runs bench/pybench/peer.py, a minimal server on the
// official `mcp` package, in a venv uv makes (uv fetches `mcp` from the
// package registry the first time; -peer=false skips the row).
//
// It builds the pyexec binary itself (for the MCP rows) and runs the engine
// in-process (so this binary doubles as the per-run launcher).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/sandbox"
)

type row struct {
	id, name string
	samples  []time.Duration
	note     string
	na       string // why the row was not measured
}

func main() {
	launcher.MaybeRun()
	n := flag.Int("n", 200, "samples per row (MCP rows: sequential calls)")
	nSlow := flag.Int("n-slow", 40, "samples for the slow rows (uv run)")
	heavy := flag.String("heavy", "sympy", "a heavy installed module for the preload rows (skipped if not importable)")
	quick := flag.Bool("quick", false, "only rows a0, a, c, d and e (for iterating)")
	peer := flag.Bool("peer", true, "measure the peer row (a minimal Python MCP server; needs uv and the `mcp` package)")
	libsOnly := flag.Bool("libs-only", false, "only the baselines and the pandas and matplotlib rows (for iterating)")
	libs := flag.Bool("libs", true, "measure the pandas and matplotlib rows (run_python with dependencies: uv installs them from the package registry once)")
	cold := flag.Bool("cold", false, "only the cold-path rows (a0, a, c, c2, e0, e1), each with and without launchers started ahead (--prestart), samples interleaved")
	dir := flag.String("dir", "", "where the benchmark's workspace and state dirs are made (default: beside pyexec's default state dir, on the filesystem a server uses)")
	flag.Parse()
	var err error
	switch {
	case *cold:
		err = runCold(*n, *dir)
	case *libsOnly:
		err = runLibsOnly(*n, *nSlow, *dir)
	default:
		err = run(*n, *nSlow, *heavy, *quick, *peer, *libs, *dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pybench:", err)
		os.Exit(1)
	}
}

// benchDirs makes the bench's scratch dir under dir (default: beside the
// server's default state dir) and its workspace in it. Where a server keeps
// its state matters: what a run's temp dir and a job's logs cost to create
// depends on the filesystem (on the machine BENCHMARKS.md was measured on,
// creating a directory and two files in /tmp took 2.3 ms, in
// ~/.local/state 65 us).
func benchDirs(dir string) (tmp, ws string, err error) {
	if dir == "" {
		dir = filepath.Dir(engine.DefaultStateDir())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", "", err
		}
	}
	if tmp, err = os.MkdirTemp(dir, "pybench-"); err != nil {
		return "", "", err
	}
	ws = filepath.Join(tmp, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", "", err
	}
	return tmp, ws, nil
}

func run(n, nSlow int, heavy string, quick, peer, libs bool, dir string) error {
	ctx := context.Background()
	tmp, ws, err := benchDirs(dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	load0 := loadavg()
	start := time.Now()

	// Every row runs under the default sandbox (workspace policy, run as
	// nobody when root, a cgroup per run) unless it says otherwise; rows c1
	// and d1 show what that confinement costs.
	open := sandbox.Settings{Policy: sandbox.PolicyNone, Limits: sandbox.Limits{MemoryBytes: -1, MaxProcs: -1}}
	coldEng, err := engine.New(engine.Config{Workspace: ws, StateDir: filepath.Join(tmp, "state-cold")})
	if err != nil {
		return err
	}
	defer coldEng.Close()
	interp, err := coldEng.DefaultInterpreter(ctx)
	if err != nil {
		return err
	}
	py := interp.Path
	fmt.Fprintf(os.Stderr, "interpreter %s (%s)\n", py, interp.Version)

	var rows []*row
	add := func(r *row) *row { rows = append(rows, r); fmt.Fprintf(os.Stderr, "%s done\n", r.name); return r }

	// The baselines: (a0) the default interpreter, with whatever its
	// site-packages runs at start; (a) the same interpreter in a fresh venv
	// (nothing in site-packages), the headline.
	clean, err := cleanPython(py, filepath.Join(tmp, "clean-venv"))
	if err != nil {
		return fmt.Errorf("clean interpreter: %w", err)
	}
	a0 := add(&row{id: "a0", name: "`python -c pass`, the default interpreter (" + py + ")", samples: sample(n, func() error {
		return exec.Command(py, "-c", "pass").Run()
	})})
	a := add(&row{id: "a", name: "`python -c pass`, a clean interpreter (a fresh venv of the default one)", samples: sample(n, func() error {
		return exec.Command(clean, "-c", "pass").Run()
	})})

	// (b) uv run.
	if quick {
		// skipped
	} else if uv := findUV(py); uv != "" {
		add(&row{id: "b", name: "uv run --no-project python -c 'print(1)'", note: uv, samples: sample(nSlow, func() error {
			cmd := exec.Command(uv, "run", "--no-project", "python", "-c", "print(1)")
			cmd.Dir = ws
			cmd.Env = append(os.Environ(), "UV_PYTHON="+py, "UV_PYTHON_DOWNLOADS=never", "UV_OFFLINE=1")
			return cmd.Run()
		})})
	} else {
		add(&row{id: "b", name: "uv run --no-project python -c 'print(1)'", na: "uv not installed"})
	}

	// (c) and (d): the engine in-process.
	print1 := engine.Request{Code: "print(1)"}
	engineRun := func(e *engine.Engine, req engine.Request) func() error {
		return func() error {
			res, err := e.Run(ctx, req, nil)
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			return err
		}
	}
	c := add(&row{id: "c", name: "engine, cold (launcher + python -u FILE), default sandbox", samples: sample(n, engineRun(coldEng, print1))})
	if !quick {
		// pyexec's own share of a cold run: the same with the clean
		// interpreter, whose start is row (a).
		cleanEng, err := engine.New(engine.Config{Workspace: ws, StateDir: filepath.Join(tmp, "state-clean"), Python: clean})
		if err != nil {
			return err
		}
		defer cleanEng.Close()
		add(&row{id: "c2", name: "engine, cold, default sandbox, the clean interpreter (`--python` a fresh venv)", samples: sample(n, engineRun(cleanEng, print1))})
	}
	warmEng, err := engine.New(engine.Config{Workspace: ws, StateDir: filepath.Join(tmp, "state-warm"), Warm: engine.WarmConfig{Spares: 2}})
	if err != nil {
		return err
	}
	defer warmEng.Close()
	if err := awaitWarm(warmEng, engineRun(warmEng, print1)); err != nil {
		return err
	}
	before := warmEng.WarmStats().Warm
	d := add(&row{id: "d", name: "engine, warm (fork server), default sandbox", samples: sample(n, engineRun(warmEng, print1))})
	if got := warmEng.WarmStats().Warm - before; got < uint64(n) {
		d.note = fmt.Sprintf("only %d of %d runs were warm", got, n)
	}
	if !quick {
		// What confinement costs: the same two rows under --sandbox none
		// without cgroup limits.
		openCold, err := engine.New(engine.Config{Workspace: ws, StateDir: filepath.Join(tmp, "state-open-cold"), Sandbox: open})
		if err != nil {
			return err
		}
		defer openCold.Close()
		add(&row{id: "c1", name: "engine, cold, --sandbox none --memory-limit -1 --max-procs -1", samples: sample(n/2, engineRun(openCold, print1))})
		openWarm, err := engine.New(engine.Config{Workspace: ws, StateDir: filepath.Join(tmp, "state-open-warm"), Sandbox: open, Warm: engine.WarmConfig{Spares: 2}})
		if err != nil {
			return err
		}
		defer openWarm.Close()
		if err := awaitWarm(openWarm, engineRun(openWarm, print1)); err != nil {
			return err
		}
		add(&row{id: "d1", name: "engine, warm, --sandbox none --memory-limit -1 --max-procs -1", samples: sample(n, engineRun(openWarm, print1))})
	}

	// Preload rows.
	imp := engine.Request{Code: "import json, decimal; print(1)"}
	if quick {
		heavy = ""
	}
	if !quick {
		add(&row{id: "i", name: "`import json, decimal; print(1)`: engine cold", samples: sample(n/2, engineRun(coldEng, imp))})
		add(&row{id: "j", name: "`import json, decimal; print(1)`: engine warm", samples: sample(n/2, engineRun(warmEng, imp))})
	}
	preEng, err := engine.New(engine.Config{Workspace: ws, StateDir: filepath.Join(tmp, "state-pre"), Warm: engine.WarmConfig{Spares: 2, Preload: []string{"json", "decimal"}}})
	if err != nil {
		return err
	}
	defer preEng.Close()
	if err := awaitWarm(preEng, engineRun(preEng, imp)); err != nil {
		return err
	}
	if !quick {
		add(&row{id: "k", name: "`import json, decimal; print(1)`: engine warm, --preload json,decimal", samples: sample(n/2, engineRun(preEng, imp))})
	}
	if heavy != "" && exec.Command(py, "-c", "import "+heavy).Run() == nil {
		hreq := engine.Request{Code: "import " + heavy + "; print(1)"}
		add(&row{id: "l", name: fmt.Sprintf("`import %s; print(1)`: engine cold", heavy), samples: sample(max(nSlow/2, 5), engineRun(coldEng, hreq))})
		heng, err := engine.New(engine.Config{Workspace: ws, StateDir: filepath.Join(tmp, "state-heavy"), Warm: engine.WarmConfig{Spares: 2, Preload: []string{heavy}}})
		if err != nil {
			return err
		}
		if err := awaitWarm(heng, engineRun(heng, hreq)); err != nil {
			return err
		}
		add(&row{id: "m", name: fmt.Sprintf("`import %s; print(1)`: engine warm, --preload %s", heavy, heavy), samples: sample(n/2, engineRun(heng, hreq))})
		heng.Close()
	}

	// MCP rows against the real binary.
	bin := filepath.Join(tmp, "pyexec")
	build := exec.Command("go", "build", "-o", bin, "./cmd/pyexec")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build pyexec (run from the module root): %w", err)
	}
	e, g, rss, err := mcpStdio(ctx, bin, ws, filepath.Join(tmp, "state-mcp"), max(n, 200), quick)
	if err != nil {
		return fmt.Errorf("mcp over stdio: %w", err)
	}
	add(e)
	if !quick {
		e0, err := mcpCold(ctx, bin, ws, filepath.Join(tmp, "state-mcp0"), max(n/2, 50))
		if err != nil {
			return fmt.Errorf("mcp (--warm 0): %w", err)
		}
		add(e0)
		e1, err := mcpCold(ctx, bin, ws, filepath.Join(tmp, "state-mcp1"), max(n/2, 50), "--python", clean)
		if err != nil {
			return fmt.Errorf("mcp (--warm 0 --python clean): %w", err)
		}
		e1.id, e1.name = "e1", "`run_python` print(1) via `pyexec mcp --warm 0 --python CLEAN` (every run cold, the clean interpreter) over stdio"
		add(e1)
		add(httpRow(ctx, bin, ws, filepath.Join(tmp, "state-http"), max(n, 200)))
		add(g)
	}
	var mem string
	if libs && !quick {
		rs, m, err := libRows(ctx, bin, ws, tmp, max(nSlow, 20))
		if err != nil {
			return fmt.Errorf("library rows: %w", err)
		}
		for _, r := range rs {
			add(r)
		}
		mem = m
	}
	if peer {
		add(peerRow(ctx, py, ws, tmp, max(n/2, 50)))
	}

	// The table.
	base, base0 := median(a.samples), median(a0.samples)
	fmt.Printf("## pybench: %s\n\n", start.UTC().Format(time.RFC3339))
	fmt.Printf("`go run ./bench/pybench -n %d` on %s, %d cores, %s; Python %s (%s); load average before %s, after %s.\n\n",
		n, kernel(), runtime.NumCPU(), runtime.Version(), interp.Version, py, load0, loadavg())
	fmt.Println("| row | what | n | median | p95 | p99 | median / (a) clean | median / (a0) default |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.na != "" {
			fmt.Printf("| %s | %s | | n/a: %s | | | | |\n", r.id, r.name, r.na)
			continue
		}
		m := median(r.samples)
		note := ""
		if r.note != "" {
			note = " (" + r.note + ")"
		}
		fmt.Printf("| %s | %s%s | %d | %s | %s | %s | %.3fx | %.3fx |\n", r.id, r.name, note, len(r.samples), ms(m), ms(pct(r.samples, 95)), ms(pct(r.samples, 99)), float64(m)/float64(base), float64(m)/float64(base0))
	}
	fmt.Println()
	if quick {
		fmt.Printf("engine warm %.0f runs/s vs engine cold %.0f (%.1fx)\n", perSec(d.samples), perSec(c.samples), perSec(d.samples)/perSec(c.samples))
		return nil
	}
	fmt.Printf("Sequential throughput (runs/s, 1/mean): python cold %.0f; engine cold %.0f; engine warm %.0f (%.1fx engine cold, %.1fx python cold); MCP stdio %.0f calls/s.\n",
		perSec(a.samples), perSec(c.samples), perSec(d.samples), perSec(d.samples)/perSec(c.samples), perSec(d.samples)/perSec(a.samples), perSec(e.samples))
	fmt.Printf("Server RSS (pyexec mcp, /proc/PID/status): idle %.1f MB; during a 200 MB stdout flood peak VmRSS %.1f MB (growth %.1f MB), VmHWM %.1f MB; flood call took %s and returned %d bytes inline of %d.\n",
		mb(rss.idle), mb(rss.peak), mb(rss.peak-rss.idle), mb(rss.hwm), rss.floodTime.Round(time.Millisecond), rss.inline, rss.total)
	if mem != "" {
		fmt.Println(mem)
	}
	fmt.Println()
	fmt.Println("Targets (ratios to (a), the clean interpreter): (e) <= 0.25x; (e0) <= 1.3x; (q) <= 15 ms; (r) <= 30 ms; (g) <= 40 ms; warm sequential throughput >= 600 runs/s.")
	return nil
}

// sample runs f n times (after 3 unmeasured warm-up runs) and returns the
// wall times.
func sample(n int, f func() error) []time.Duration {
	for i := 0; i < 3; i++ {
		if err := f(); err != nil {
			fmt.Fprintln(os.Stderr, "warm-up failed:", err)
			os.Exit(1)
		}
	}
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := f(); err != nil {
			fmt.Fprintln(os.Stderr, "run failed:", err)
			os.Exit(1)
		}
		out = append(out, time.Since(t0))
	}
	return out
}

// awaitWarm runs f until the engine's warm interpreter serves it.
func awaitWarm(e *engine.Engine, f func() error) error {
	for i := 0; i < 500; i++ {
		before := e.WarmStats().Warm
		if err := f(); err != nil {
			return err
		}
		if e.WarmStats().Warm > before {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("the warm interpreter never became ready")
}

func findUV(py string) string {
	// Next to the interpreter first: PATH may hold a pyenv shim, which
	// would add 100+ ms that has nothing to do with uv.
	if p := filepath.Join(filepath.Dir(py), "uv"); isExec(p) {
		return p
	}
	p, err := exec.LookPath("uv")
	if err != nil {
		return ""
	}
	return p
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

type rssReport struct {
	idle, peak, hwm int64
	floodTime       time.Duration
	inline, total   int64
}

// mcpStdio measures (e) sequential run_python calls, (g) 20-snippet
// batches and (h) the server's memory, against `pyexec mcp`.
func mcpStdio(ctx context.Context, bin, ws, state string, n int, quick bool) (*row, *row, rssReport, error) {
	var rep rssReport
	cmd := exec.Command(bin, "mcp", "--workspace", ws, "--state-dir", state, "--log-level", "warn")
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pybench", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, nil, rep, err
	}
	defer sess.Close()
	pid := cmd.Process.Pid
	call := func(name string, args map[string]any) (map[string]any, error) {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return nil, err
		}
		if res.IsError {
			return nil, fmt.Errorf("%s: tool error: %v", name, res.Content)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var out map[string]any
		err = json.Unmarshal(raw, &out)
		return out, err
	}
	runPrint1 := func() error {
		out, err := call("run_python", map[string]any{"code": "print(1)"})
		if err == nil && (out["stdout"] != "1\n" || out["exit_code"] != 0.0) {
			err = fmt.Errorf("unexpected result %v", out)
		}
		return err
	}
	// Let the server's warm interpreter come up before measuring.
	for i := 0; i < 50; i++ {
		if err := runPrint1(); err != nil {
			return nil, nil, rep, err
		}
	}
	e := &row{id: "e", name: "`run_python` print(1) via `pyexec mcp` (default flags) over stdio (go-sdk client, sequential)", samples: sample(n, runPrint1)}
	if z := processesWith(filepath.Join(state, "warm", "driver-")); len(z) == 0 {
		e.note = "no warm interpreter running: these calls were cold"
	}
	if quick {
		return e, nil, rep, nil
	}

	codes := make([]any, 20)
	for i := range codes {
		codes[i] = fmt.Sprintf("print(%d)", i)
	}
	batch := func() error {
		out, err := call("run_python_batch", map[string]any{"codes": codes})
		if err == nil {
			if rs, _ := out["results"].([]any); len(rs) != 20 {
				err = fmt.Errorf("batch returned %v", out)
			}
		}
		return err
	}
	g := &row{id: "g", name: "`run_python_batch` of 20 print snippets via `pyexec mcp` over stdio", samples: sample(max(n/10, 20), batch)}
	g.note = fmt.Sprintf("%s per snippet", ms(median(g.samples)/20))

	// (h) memory: idle, then while a run prints 200 MB.
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	rep.idle = procStatus(pid, "VmRSS")
	stop := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var m int64
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				peak <- m
				return
			case <-t.C:
				m = max(m, procStatus(pid, "VmRSS"))
			}
		}
	}()
	t0 := time.Now()
	out, err := call("run_python", map[string]any{"code": "import sys\nb = 'x' * (1 << 20)\nfor _ in range(200):\n    sys.stdout.write(b)\n", "timeout": 120})
	rep.floodTime = time.Since(t0)
	close(stop)
	rep.peak = <-peak
	rep.hwm = procStatus(pid, "VmHWM")
	if err != nil {
		return nil, nil, rep, fmt.Errorf("flood: %w", err)
	}
	rep.total = int64(out["stdout_bytes"].(float64))
	rep.inline = int64(len(out["stdout"].(string)))
	return e, g, rep, nil
}

// httpRow measures (f): run_python over MCP Streamable HTTP against
// `pyexec serve`, when this build has it.
func httpRow(ctx context.Context, bin, ws, state string, n int) *row {
	r := &row{id: "f", name: "`run_python` print(1) via `pyexec serve` (default flags) /mcp over Streamable HTTP (go-sdk client, sequential)"}
	if exec.Command(bin, "serve", "--help").Run() != nil {
		r.na = "not built (no `pyexec serve` in this build)"
		return r
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.na = err.Error()
		return r
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--listen", addr, "--workspace", ws, "--state-dir", state, "--log-level", "warn")
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		r.na = err.Error()
		return r
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	up := false
	for i := 0; i < 200 && !up; i++ {
		if resp, err := http.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			up = true
		} else {
			time.Sleep(25 * time.Millisecond)
		}
	}
	if !up {
		r.na = "serve did not come up"
		return r
	}
	// serve generated a token into its state dir; a client on this
	// machine reads it from there.
	tokenBytes, err := os.ReadFile(filepath.Join(state, "server-token"))
	if err != nil {
		r.na = "token: " + err.Error()
		return r
	}
	hc := &http.Client{Transport: bearerTransport{token: strings.TrimSpace(string(tokenBytes))}}
	client := mcp.NewClient(&mcp.Implementation{Name: "pybench", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		r.na = "connect: " + err.Error()
		return r
	}
	defer sess.Close()
	call := func() error {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "print(1)"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %v", res.Content)
		}
		return err
	}
	for i := 0; i < 50; i++ {
		if err := call(); err != nil {
			r.na = err.Error()
			return r
		}
	}
	r.samples = sample(n, call)
	if z := processesWith(filepath.Join(state, "warm", "driver-")); len(z) == 0 {
		r.note = "no warm interpreter running: these calls were cold"
	}
	return r
}

func procStatus(pid int, key string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func median(s []time.Duration) time.Duration { return pct(s, 50) }

func pct(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(math.Ceil(p/100*float64(len(c)))) - 1
	return c[min(max(i, 0), len(c)-1)]
}

func perSec(s []time.Duration) float64 {
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	if sum == 0 {
		return 0
	}
	return float64(len(s)) / sum.Seconds()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
func mb(b int64) float64        { return float64(b) / (1 << 20) }

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:3], " ")
}

func kernel() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return runtime.GOOS
	}
	return "Linux " + strings.TrimSpace(string(data))
}

// mcpCold measures (e0): run_python against `pyexec mcp --warm 0`, every
// run a fresh interpreter.
func mcpCold(ctx context.Context, bin, ws, state string, n int, extra ...string) (*row, error) {
	cmd := exec.Command(bin, append([]string{"mcp", "--warm", "0", "--workspace", ws, "--state-dir", state, "--log-level", "warn"}, extra...)...)
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pybench", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	call := func() error {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "print(1)"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %v", res.Content)
		}
		return err
	}
	return &row{id: "e0", name: "`run_python` print(1) via `pyexec mcp --warm 0` (every run cold) over stdio", samples: sample(n, call)}, nil
}

// processesWith lists the live processes whose command line contains s.
func processesWith(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(data), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cleanPython makes a fresh venv of py at dir (uv if installed, else the
// venv module) and returns its interpreter: the same binary without the
// base's site-packages, so without its .pth files.
func cleanPython(py, dir string) (string, error) {
	var cmd *exec.Cmd
	if uv := findUV(py); uv != "" {
		cmd = exec.Command(uv, "venv", "--quiet", "--python", py, dir)
		cmd.Env = append(os.Environ(), "UV_PYTHON_DOWNLOADS=never")
	} else {
		cmd = exec.Command(py, "-m", "venv", "--without-pip", dir)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v: %s", err, out)
	}
	return filepath.Join(dir, "bin", "python"), nil
}

// peerRow measures (p): the run_python tool of bench/pybench/peer.py, a
// minimal MCP server on the official `mcp` package that writes the code to
// a temp file and runs `python -u FILE` per call (the py-executor seed's
// design), driven by the same go-sdk client as pyexec's rows.
func peerRow(ctx context.Context, py, ws, tmp string, n int) *row {
	r := &row{id: "p", name: "peer: `run_python` print(1) via a minimal Python MCP server (official `mcp` package, `subprocess.run([python, \"-u\", file])` per call) over stdio (go-sdk client, sequential)"}
	uv := findUV(py)
	if uv == "" {
		r.na = "uv not installed (it makes the peer's venv)"
		return r
	}
	venv := filepath.Join(tmp, "peer-venv")
	for _, args := range [][]string{
		{"venv", "--quiet", "--python", py, venv},
		{"pip", "install", "--quiet", "--python", filepath.Join(venv, "bin", "python"), "mcp"},
	} {
		cmd := exec.Command(uv, args...)
		cmd.Env = append(os.Environ(), "UV_PYTHON_DOWNLOADS=never")
		if out, err := cmd.CombinedOutput(); err != nil {
			r.na = fmt.Sprintf("uv %s: %v: %s", args[0], err, strings.TrimSpace(string(out)))
			return r
		}
	}
	script, err := filepath.Abs(filepath.Join("bench", "pybench", "peer.py"))
	if err != nil {
		r.na = err.Error()
		return r
	}
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), script)
	cmd.Dir = ws
	cmd.Stderr = io.Discard
	client := mcp.NewClient(&mcp.Implementation{Name: "pybench", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		r.na = "connect: " + err.Error()
		return r
	}
	defer sess.Close()
	call := func() error {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "print(1)"}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("peer tool error: %v", res.Content)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if res.StructuredContent == nil && len(res.Content) > 0 {
			if t, ok := res.Content[0].(*mcp.TextContent); ok {
				raw = []byte(t.Text)
			}
		}
		var out struct {
			Stdout string `json:"stdout"`
		}
		if json.Unmarshal(raw, &out) != nil || out.Stdout != "1\n" {
			return fmt.Errorf("peer returned %s", raw)
		}
		return nil
	}
	for i := 0; i < 10; i++ {
		if err := call(); err != nil {
			r.na = err.Error()
			return r
		}
	}
	r.samples = sample(n, call)
	return r
}

// bearerTransport adds the execution server's token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// libRows measures what agents run: a pandas snippet and a matplotlib plot
// through run_python with dependencies (one uv environment each, built by
// the first call), third and later calls, against `pyexec mcp` with default
// flags (adaptive preload on) and with --preload-auto=false (every call
// imports the library, as in every peer). It also reports the memory of the
// fork servers that preloaded pandas.
func libRows(ctx context.Context, bin, ws, tmp string, n int) ([]*row, string, error) {
	pandas := map[string]any{"code": "import pandas as pd; print(pd.DataFrame({'a':[1]}).a.sum())", "dependencies": []any{"pandas"}}
	plot := map[string]any{"code": "import matplotlib.pyplot as plt; plt.plot([1,2]); plt.savefig('p.png')", "dependencies": []any{"matplotlib"}}
	var rows []*row
	mem := ""
	for _, auto := range []bool{false, true} {
		state := filepath.Join(tmp, fmt.Sprintf("state-libs-%v", auto))
		cmd := exec.Command(bin, "mcp", "--workspace", ws, "--state-dir", state, "--log-level", "warn", fmt.Sprintf("--preload-auto=%v", auto))
		cmd.Stderr = os.Stderr
		client := mcp.NewClient(&mcp.Implementation{Name: "pybench", Version: "1"}, nil)
		sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			return nil, "", err
		}
		pid := cmd.Process.Pid
		for _, lib := range []struct {
			id, name string
			args     map[string]any
		}{{"q", "`import pandas as pd; print(pd.DataFrame({'a':[1]}).a.sum())`", pandas}, {"r", "`import matplotlib.pyplot as plt; plt.plot([1,2]); plt.savefig('p.png')`", plot}} {
			call := func() error {
				res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: lib.args})
				if err == nil && res.IsError {
					err = fmt.Errorf("tool error: %v", res.Content)
				}
				return err
			}
			// The first calls build the environment and, with adaptive
			// preload, start the fork server that has the library imported:
			// "third and later calls", once it serves.
			for i := 0; i < 2; i++ {
				if err := call(); err != nil {
					sess.Close()
					return nil, "", err
				}
			}
			if auto {
				for i := 0; i < 40; i++ {
					t0 := time.Now()
					if err := call(); err != nil {
						sess.Close()
						return nil, "", err
					}
					if time.Since(t0) < 60*time.Millisecond {
						break
					}
					time.Sleep(250 * time.Millisecond) // the replacement imports in the background
				}
			}
			r := &row{id: lib.id + "0", name: lib.name + " via `pyexec mcp --preload-auto=false`, dependencies (third and later calls)"}
			if auto {
				r.id, r.name = lib.id, lib.name+" via `pyexec mcp` (default flags: adaptive preload), dependencies (third and later calls)"
			}
			r.samples = sample(n, call)
			rows = append(rows, r)
		}
		if auto {
			mem = forkServerMemory(pid, state)
		}
		sess.Close()
	}
	return rows, mem, nil
}

// forkServerMemory describes the server's RSS and each fork server's
// resident and private memory (/proc/PID/smaps_rollup).
func forkServerMemory(server int, state string) string {
	var parts []string
	for _, pid := range processesWith(filepath.Join(state, "warm", "driver-")) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if pp, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ppid)); strings.Contains(string(pp), "driver-") {
			continue // a fork (spare or supervisor), not a fork server
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		preload := ""
		if len(args) > 4 {
			preload = args[4]
		}
		parts = append(parts, fmt.Sprintf("fork server %d (preload %q): RSS %.1f MB, private %.1f MB", pid, preload, mb(smaps(pid, "Rss")), mb(smaps(pid, "Private_Clean")+smaps(pid, "Private_Dirty"))))
	}
	return fmt.Sprintf("Memory with adaptive preload (after rows q and r): server VmRSS %.1f MB; %s.", mb(procStatus(server, "VmRSS")), strings.Join(parts, "; "))
}

func smaps(pid int, key string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// runLibsOnly prints the baselines and the library rows only.
func runLibsOnly(n, nSlow int, dir string) error {
	ctx := context.Background()
	if dir == "" {
		dir = filepath.Dir(engine.DefaultStateDir())
	}
	tmp, err := os.MkdirTemp(dir, "pybench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ws := filepath.Join(tmp, "ws")
	os.MkdirAll(ws, 0o755)
	eng, err := engine.New(engine.Config{Workspace: ws, StateDir: filepath.Join(tmp, "state")})
	if err != nil {
		return err
	}
	interp, err := eng.DefaultInterpreter(ctx)
	eng.Close()
	if err != nil {
		return err
	}
	clean, err := cleanPython(interp.Path, filepath.Join(tmp, "clean-venv"))
	if err != nil {
		return err
	}
	a0 := &row{id: "a0", name: "`python -c pass`, the default interpreter", samples: sample(n, func() error { return exec.Command(interp.Path, "-c", "pass").Run() })}
	a := &row{id: "a", name: "`python -c pass`, a clean interpreter", samples: sample(n, func() error { return exec.Command(clean, "-c", "pass").Run() })}
	bin := filepath.Join(tmp, "pyexec")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/pyexec").CombinedOutput(); err != nil {
		return fmt.Errorf("build pyexec: %v: %s", err, out)
	}
	rs, mem, err := libRows(ctx, bin, ws, tmp, max(nSlow, 20))
	if err != nil {
		return err
	}
	fmt.Printf("load average %s\n\n| row | what | n | median | p95 | median / (a) clean | median / (a0) default |\n|---|---|---:|---:|---:|---:|---:|\n", loadavg())
	for _, r := range append([]*row{a0, a}, rs...) {
		m := median(r.samples)
		fmt.Printf("| %s | %s | %d | %s | %s | %.3fx | %.3fx |\n", r.id, r.name, len(r.samples), ms(m), ms(pct(r.samples, 95)), float64(m)/float64(median(a.samples)), float64(m)/float64(median(a0.samples)))
	}
	fmt.Println(mem)
	return nil
}

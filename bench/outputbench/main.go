// Command outputbench measures what pyexec adds to build what a model
// sees, in one run on one machine, each figure against a baseline measured
// in the same run:
//
//   - image capture: a warm run that draws one 640x480 matplotlib figure
//     (saves it) and calls plt.show(), with capture on and off
//     (PYEXEC_CAPTURE_IMAGES=0); and a run that never draws it, where
//     capture's cost is the drawing;
//
//   - the environment's font cache: the same run with matplotlib's config
//     dir pointed elsewhere, so that it scans the fonts as it would without
//     pyexec's per-environment cache;
//
//   - the changed-file scan: a warm run of `pass` in a workspace of 10,000
//     files against the same run in an empty one, and the scan itself;
//
//   - the size of the MCP result of a script that prints 5 MB.
//
//     go run ./bench/outputbench              # from the module root
//     go run ./bench/outputbench -n 40
//
// matplotlib comes from the package registry through uv (uv's cache keeps
// reruns fast).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/mcpserver"
	"github.com/pyexec/pyexec/internal/workspace"
)

func main() {
	launcher.MaybeRun()
	n := flag.Int("n", 30, "samples per row")
	dir := flag.String("dir", "", "where the workspaces and state dirs are made (default: beside pyexec's default state dir)")
	flag.Parse()
	if err := run(*n, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "outputbench:", err)
		os.Exit(1)
	}
}

func run(n int, dir string) error {
	ctx := context.Background()
	if dir == "" {
		dir = filepath.Dir(engine.DefaultStateDir())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp(dir, "outputbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	mk := func(name string) string {
		d := filepath.Join(tmp, name)
		os.MkdirAll(d, 0o755)
		return d
	}
	ws, big := mk("ws"), mk("ws-10k")
	for d := range 100 {
		sub := filepath.Join(big, fmt.Sprintf("d%03d", d))
		os.Mkdir(sub, 0o755)
		for f := range 100 {
			os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.txt", f)), []byte("x"), 0o644)
		}
	}
	warm := engine.WarmConfig{Spares: 2}
	eng, err := engine.New(engine.Config{Workspace: ws, StateDir: mk("state"), Warm: warm})
	if err != nil {
		return err
	}
	defer eng.Close()
	engBig, err := engine.New(engine.Config{Workspace: big, StateDir: mk("state-10k"), Warm: warm})
	if err != nil {
		return err
	}
	defer engBig.Close()

	fmt.Printf("# outputbench: %d samples per row, warm runs, default sandbox\n\n", n)

	// Image capture: warm runs forked from an interpreter that has
	// matplotlib.pyplot imported already (--preload), so that a run is the
	// figure and its capture, not matplotlib's import.
	fmt.Fprintln(os.Stderr, "building an environment with matplotlib (uv)...")
	deps := []string{"matplotlib"}
	if _, err := runOK(ctx, eng, engine.Request{Code: "import matplotlib", Dependencies: deps, Timeout: 900}); err != nil {
		return err
	}
	engPlot, err := engine.New(engine.Config{Workspace: ws, StateDir: eng.Config().StateDir,
		Warm: engine.WarmConfig{Spares: 2, Preload: []string{"matplotlib.pyplot"}}})
	if err != nil {
		return err
	}
	defer engPlot.Close()
	plot := "import matplotlib.pyplot as plt\nplt.figure(figsize=(6.4, 4.8), dpi=100)\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('t')\nplt.show()\n"
	on := engine.Request{Code: plot, Dependencies: deps}
	off := engine.Request{Code: plot, Dependencies: deps, EnvVars: map[string]string{"PYEXEC_CAPTURE_IMAGES": "0"}}
	res, err := runOK(ctx, engPlot, on)
	if err != nil {
		return err
	}
	if len(res.Display) != 1 {
		return fmt.Errorf("capture on: %d displays, want 1 (stderr %q)", len(res.Display), res.Stderr)
	}
	// The target's run: one that draws its figure (here by saving it, as
	// agents' scripts do), with capture on and off. Capture then encodes
	// what the script drew rather than drawing it again.
	save := "import io\nplt.savefig(io.BytesIO(), format='png')\n"
	plotSaved := strings.Replace(plot, "plt.show()\n", save+"plt.show()\n", 1)
	drawnOn := engine.Request{Code: plotSaved, Dependencies: deps}
	drawnOff := engine.Request{Code: plotSaved, Dependencies: deps, EnvVars: map[string]string{"PYEXEC_CAPTURE_IMAGES": "0"}}
	capDrawnOn, capDrawnOff, err := sample2(ctx, engPlot, drawnOn, engPlot, drawnOff, n)
	if err != nil {
		return err
	}
	// A run that never draws its figure: capture draws it, which capture
	// off skips.
	capOn, capOff, err := sample2(ctx, engPlot, on, engPlot, off, n)
	if err != nil {
		return err
	}
	fmt.Println("## Image capture (one 640x480 figure, plt.show(); warm runs with matplotlib.pyplot preloaded)")
	fmt.Println()
	fmt.Println("| row | median | p90 |")
	fmt.Println("|---|---:|---:|")
	row("the script draws (saves) its figure, capture off (PYEXEC_CAPTURE_IMAGES=0)", capDrawnOff)
	row("the script draws (saves) its figure, capture on (the default)", capDrawnOn)
	row("the script never draws it, capture off: plt.show() draws nothing under Agg", capOff)
	row("the script never draws it, capture on: pyexec draws it at show()", capOn)
	fmt.Printf("\ncapture adds **%.1f ms** to a run that draws one figure (median on - median off; target <= 15 ms); "+
		"to a run that never draws it, %.1f ms, which is the drawing itself.\n\n", ms(median(capDrawnOn)-median(capDrawnOff)), ms(median(capOn)-median(capOff)))

	// The font cache: the font manager's first use, timed inside the run,
	// with the environment's cache (the default) and with a fresh config
	// dir of the run's own (what every run did before: a full font scan).
	fontCode := "import time\nt = time.perf_counter()\nimport matplotlib.font_manager as f\nf.fontManager.findfont('DejaVu Sans')\nprint((time.perf_counter() - t) * 1000)\n"
	var cached, scanned []time.Duration
	for i := range n {
		r, err := runOK(ctx, eng, engine.Request{Code: fontCode, Dependencies: deps})
		if err != nil {
			return err
		}
		cached = append(cached, inRun(r))
		fresh := engine.Request{Code: "import os, tempfile\nos.environ['MPLCONFIGDIR'] = tempfile.mkdtemp()\n" + fontCode, Dependencies: deps}
		if r, err = runOK(ctx, eng, fresh); err != nil {
			return err
		}
		scanned = append(scanned, inRun(r))
		_ = i
	}
	fmt.Println("## matplotlib's font list (first use of the font manager, timed inside the run)")
	fmt.Println()
	fmt.Println("| row | median | p90 |")
	fmt.Println("|---|---:|---:|")
	row("fresh config dir: matplotlib scans the fonts (every run before the cache)", scanned)
	row("the environment's font cache, copied into the run's config dir (the default)", cached)
	fmt.Printf("\nthe per-environment font cache saves **%.0f ms** per plotting run.\n\n", ms(median(scanned)-median(cached)))

	// The changed-file scan.
	pass := engine.Request{Code: "pass"}
	if _, err := runOK(ctx, engBig, pass); err != nil { // sets the watches up
		return err
	}
	small, large, err := sample2(ctx, eng, pass, engBig, pass, n*3)
	if err != nil {
		return err
	}
	root, err := workspace.NewRoot(big)
	if err != nil {
		return err
	}
	w := workspace.NewWatcher(root)
	defer w.Close()
	w.Begin().End(workspace.ServerRights)
	var spans []time.Duration
	for range 1000 {
		t0 := time.Now()
		w.Begin().End(workspace.ServerRights)
		spans = append(spans, time.Since(t0))
	}
	fmt.Println("## Changed-file scan (a warm run of `pass`)")
	fmt.Println()
	fmt.Println("| row | median | p90 |")
	fmt.Println("|---|---:|---:|")
	row("empty workspace", small)
	row("workspace of 10,000 files in 100 directories", large)
	row("the scan alone (inotify queue read at start and end, 10,000 files)", spans)
	fmt.Printf("\nthe 10,000-file workspace adds **%.2f ms** per run (median difference; target <= 1 ms); the scan itself takes %.1f µs.\n\n",
		ms(median(large)-median(small)), float64(median(spans).Nanoseconds())/1e3)

	// The 5 MB result.
	size, textLen, last, err := bigResult(ctx, eng, tmp)
	if err != nil {
		return err
	}
	fmt.Println("## A script that prints 5 MB (run_python over MCP)")
	fmt.Println()
	fmt.Printf("the result is **%s bytes of JSON** (target <= 100,000, about 25,000 tokens), its text %s characters; last line visible: %v.\n",
		commas(size), commas(textLen), last)
	return nil
}

// inRun is the milliseconds a run printed as its last line.
func inRun(r engine.Result) time.Duration {
	lines := strings.Fields(r.Stdout)
	if len(lines) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(lines[len(lines)-1], 64)
	return time.Duration(v * float64(time.Millisecond))
}

func runOK(ctx context.Context, e *engine.Engine, req engine.Request) (engine.Result, error) {
	res, err := e.Run(ctx, req, nil)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	return res, err
}

func timed(ctx context.Context, e *engine.Engine, req engine.Request) (time.Duration, error) {
	t0 := time.Now()
	_, err := runOK(ctx, e, req)
	return time.Since(t0), err
}

// sample2 measures two rows in alternation (a, b, a, b, ...), after one
// unmeasured run of each, so that drift in the machine's load falls on
// both alike.
func sample2(ctx context.Context, ea *engine.Engine, a engine.Request, eb *engine.Engine, b engine.Request, n int) ([]time.Duration, []time.Duration, error) {
	for _, x := range []struct {
		e *engine.Engine
		r engine.Request
	}{{ea, a}, {eb, b}} {
		if _, err := runOK(ctx, x.e, x.r); err != nil {
			return nil, nil, err
		}
	}
	var as, bs []time.Duration
	for range n {
		d, err := timed(ctx, ea, a)
		if err != nil {
			return nil, nil, err
		}
		as = append(as, d)
		if d, err = timed(ctx, eb, b); err != nil {
			return nil, nil, err
		}
		bs = append(bs, d)
	}
	return as, bs, nil
}

func bigResult(ctx context.Context, eng *engine.Engine, tmp string) (int, int, bool, error) {
	lj, err := executor.OpenLocalJobs(ctx, executor.NewLocal(eng, "bench", 2), jobs.Config{StateDir: filepath.Join(tmp, "jobs")})
	if err != nil {
		return 0, 0, false, err
	}
	defer lj.Close(ctx)
	srv := mcpserver.New(lj, mcpserver.Options{Version: "bench", SyncBudget: time.Minute})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		return 0, 0, false, err
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "outputbench"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return 0, 0, false, err
	}
	defer cs.Close()
	code := "for i in range(50000):\n    print('line %06d ' % i + 'x' * 90)\nprint('END OF STDOUT')\n"
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code}})
	if err != nil {
		return 0, 0, false, err
	}
	raw, _ := json.Marshal(r)
	var text strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	return len(raw), text.Len(), strings.Contains(text.String(), "END OF STDOUT"), nil
}

func row(name string, ds []time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	fmt.Printf("| %s | %.1f ms | %.1f ms |\n", name, ms(s[len(s)/2]), ms(s[len(s)*9/10]))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func commas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

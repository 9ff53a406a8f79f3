// Command sessionbench measures live Python sessions against plain runs
// and a clean interpreter start, in one run on one machine, and prints a
// markdown table (medians, ratios to the clean interpreter).
//
//	go run ./bench/sessionbench            # from the module root
//	go run ./bench/sessionbench -n 100 -pandas=false
//
// It builds the pyexec binary and drives `pyexec mcp` over stdio with the
// go-sdk client, as an MCP client would. The pandas rows install pandas
// through uv (the package registry) into a cached environment first.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
)

type row struct {
	id, name string
	samples  []time.Duration
	note     string
}

func main() {
	n := flag.Int("n", 100, "samples per row")
	nCreate := flag.Int("n-create", 30, "sessions created for the creation rows")
	pandas := flag.Bool("pandas", true, "measure the import pandas rows (installs pandas with uv)")
	idle := flag.Int("idle", 32, "idle sessions for the memory row")
	mpl := flag.Bool("matplotlib", true, "measure the figure rows (installs matplotlib with uv)")
	flag.Parse()
	if err := run(*n, *nCreate, *idle, *pandas, *mpl); err != nil {
		fmt.Fprintln(os.Stderr, "sessionbench:", err)
		os.Exit(1)
	}
}

func run(n, nCreate, idle int, pandas, mpl bool) error {
	ctx := context.Background()
	base := filepath.Dir(engine.DefaultStateDir())
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(base, "sessionbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ws, state := filepath.Join(tmp, "ws"), filepath.Join(tmp, "state")
	os.MkdirAll(ws, 0o755)
	bin := filepath.Join(tmp, "pyexec")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/pyexec").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	load0 := loadavg()

	var rows []*row
	add := func(r *row) *row {
		rows = append(rows, r)
		fmt.Fprintf(os.Stderr, "%s: median %s\n", r.name, ms(median(r.samples)))
		return r
	}

	clean := "/usr/bin/python3"
	if _, err := os.Stat(clean); err != nil {
		clean = ""
	}
	var c0 *row
	if clean != "" {
		c0 = add(&row{id: "c0", name: "clean python: `/usr/bin/python3 -c pass`", samples: sample(n, func() error { return exec.Command(clean, "-c", "pass").Run() })})
	}

	cmd := exec.Command(bin, "mcp", "--workspace", ws, "--state-dir", state, "--log-level", "warn", "--max-sessions", strconv.Itoa(idle+8))
	cmd.Stderr = os.Stderr
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "sessionbench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return err
	}
	defer sess.Close()
	call := func(name string, args map[string]any) (map[string]any, error) {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return nil, err
		}
		if res.IsError {
			return nil, fmt.Errorf("%s: %v", name, res.Content[0].(*mcp.TextContent).Text)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var out map[string]any
		err = json.Unmarshal(raw, &out)
		return out, err
	}
	want := func(out map[string]any, err error, key string, value any) error {
		if err == nil && out[key] != value {
			err = fmt.Errorf("%s = %v, want %v (%v)", key, out[key], value, out)
		}
		return err
	}
	def, err := call("server_info", map[string]any{})
	if err != nil {
		return err
	}
	py := def["default_interpreter"].(map[string]any)["path"].(string)
	c1 := add(&row{id: "c1", name: "default python: `" + py + " -c pass`", samples: sample(n, func() error { return exec.Command(py, "-c", "pass").Run() })})
	if c0 == nil {
		c0 = c1
	}

	r1 := add(&row{id: "r1", name: "`run_python` `x = 1; x` (plain warm run) over MCP stdio", samples: sample(n, func() error {
		out, err := call("run_python", map[string]any{"code": "x = 1; print(x)"})
		return want(out, err, "stdout", "1\n")
	})})
	if _, err := call("session_create", map[string]any{"session": "bench"}); err != nil {
		return err
	}
	if _, err := call("run_python", map[string]any{"session": "bench", "code": "x = 0"}); err != nil {
		return err
	}
	s1 := add(&row{id: "s1", name: "trivial cell `x += 1; x` in a session over MCP stdio", samples: sample(n, func() error {
		out, err := call("run_python", map[string]any{"session": "bench", "code": "x += 1; x"})
		if err == nil && out["result"] == nil {
			err = fmt.Errorf("no result: %v", out)
		}
		return err
	})})

	// Session creation: the server-side start (start_seconds) and the
	// create call's round trip; closing is not timed.
	creates := 0
	createRow := func(id, name string, pause bool) *row {
		var server, trip []time.Duration
		for i := 0; i < nCreate+2; i++ {
			if pause {
				time.Sleep(300 * time.Millisecond) // untimed: the pool's replacement fork server gets ready
			}
			creates++
			name := fmt.Sprintf("c%d", creates)
			t0 := time.Now()
			out, err := call("session_create", map[string]any{"session": name})
			d := time.Since(t0)
			if err != nil {
				fmt.Fprintln(os.Stderr, "create failed:", err)
				os.Exit(1)
			}
			if i >= 2 { // two warm-ups
				trip = append(trip, d)
				server = append(server, time.Duration(out["start_seconds"].(float64)*float64(time.Second)))
			}
			call("session_close", map[string]any{"session": name})
		}
		return add(&row{id: id, name: name, samples: server, note: "round trip " + ms(median(trip))})
	}
	s2 := createRow("s2", "session start (server side), a ready fork server (creates 300 ms apart)", true)
	s3 := createRow("s3", "session start (server side), creates back to back (the pool's replacement fork server may still be starting: then cold)", false)

	var pandasRows []*row
	if pandas {
		deps := []string{"pandas"}
		// Build the cached environment once, outside the measurements.
		if _, err := call("run_python", map[string]any{"code": "import pandas", "dependencies": deps, "timeout": 600}); err != nil {
			return err
		}
		p1 := add(&row{id: "p1", name: "plain `run_python` `import pandas` (cached env, every call imports again)", samples: sample(max(10, n/5), func() error {
			_, err := call("run_python", map[string]any{"code": "import pandas", "dependencies": deps})
			return err
		})})
		pandasRows = append(pandasRows, p1)
		var first []time.Duration
		for i := 0; i < 5; i++ {
			name := fmt.Sprintf("pd%d", i)
			if _, err := call("session_create", map[string]any{"session": name, "dependencies": deps}); err != nil {
				return err
			}
			t0 := time.Now()
			if _, err := call("run_python", map[string]any{"session": name, "code": "import pandas as pd"}); err != nil {
				return err
			}
			first = append(first, time.Since(t0))
			if i > 0 {
				call("session_close", map[string]any{"session": name})
			}
		}
		pandasRows = append(pandasRows, add(&row{id: "p2", name: "first cell `import pandas as pd` in a session", samples: first}))
		call("run_python", map[string]any{"session": "pd0", "code": "x = 0"})
		triv := add(&row{id: "p3", name: "trivial cell in the pandas session", samples: sample(n, func() error {
			_, err := call("run_python", map[string]any{"session": "pd0", "code": "x += 1; x"})
			return err
		})})
		use := add(&row{id: "p4", name: "second cell using pandas `pd.DataFrame({'a': [x]}).shape`", samples: sample(n, func() error {
			out, err := call("run_python", map[string]any{"session": "pd0", "code": "pd.DataFrame({'a': [x]}).shape"})
			return want(out, err, "result", "(1, 1)")
		})})
		use.note = fmt.Sprintf("%+.2f ms vs the trivial cell (target <= 3 ms)", float64(median(use.samples)-median(triv.samples))/1e6)
		pandasRows = append(pandasRows, triv, use)
	}

	if mpl {
		deps := []string{"matplotlib"}
		if _, err := call("run_python", map[string]any{"code": "import matplotlib", "dependencies": deps, "timeout": 600}); err != nil {
			return err
		}
		setup := "import matplotlib.pyplot as plt\nx = 0"
		for _, name := range []string{"mpl", "mploff"} {
			args := map[string]any{"session": name, "dependencies": deps}
			if name == "mploff" {
				args["env_vars"] = map[string]string{"PYEXEC_CAPTURE_IMAGES": "0"}
			}
			if _, err := call("session_create", args); err != nil {
				return err
			}
			if _, err := call("run_python", map[string]any{"session": name, "code": setup}); err != nil {
				return err
			}
		}
		triv := add(&row{id: "m1", name: "trivial cell in a session that imported matplotlib.pyplot", samples: sample(n, func() error {
			_, err := call("run_python", map[string]any{"session": "mpl", "code": "x += 1; x"})
			return err
		})})
		draw := "plt.figure(figsize=(6.4, 4.8))\nplt.plot([1, 3, 2])\nplt.title('bench')\nNone"
		fig := add(&row{id: "m2", name: "cell drawing one 640x480 figure, captured at the cell's end (PNG inline in the result)", samples: sample(max(10, n/2), func() error {
			out, err := call("run_python", map[string]any{"session": "mpl", "code": draw})
			if err == nil && len(out["images"].([]any)) != 1 {
				err = fmt.Errorf("no image: %v", out)
			}
			return err
		})})
		off := add(&row{id: "m3", name: "the same cell with image capture off (PYEXEC_CAPTURE_IMAGES=0: the figure is not rendered)", samples: sample(max(10, n/2), func() error {
			_, err := call("run_python", map[string]any{"session": "mploff", "code": draw + "\nplt.close('all')"})
			return err
		})})
		// A cell that draws its figure itself (as savefig or a canvas draw
		// does): the capture then encodes what was drawn.
		drawn := draw + "\nplt.gcf().canvas.draw()"
		fig2 := add(&row{id: "m4", name: "cell drawing one 640x480 figure and rendering it itself (canvas.draw()), captured at the cell's end", samples: sample(max(10, n/2), func() error {
			out, err := call("run_python", map[string]any{"session": "mpl", "code": drawn})
			if err == nil && len(out["images"].([]any)) != 1 {
				err = fmt.Errorf("no image: %v", out)
			}
			return err
		})})
		off2 := add(&row{id: "m5", name: "the same cell with image capture off", samples: sample(max(10, n/2), func() error {
			_, err := call("run_python", map[string]any{"session": "mploff", "code": drawn + "\nplt.close('all')"})
			return err
		})})
		fig.note = fmt.Sprintf("%+.2f ms vs the trivial cell, %+.2f ms vs capture off (m3): the capture draws the figure", float64(median(fig.samples)-median(triv.samples))/1e6, float64(median(fig.samples)-median(off.samples))/1e6)
		fig2.note = fmt.Sprintf("%+.2f ms vs capture off (m5): the capture only encodes (target for runs: <= 15 ms)", float64(median(fig2.samples)-median(off2.samples))/1e6)
		call("session_close", map[string]any{"session": "mpl"})
		call("session_close", map[string]any{"session": "mploff"})
	}

	// Memory: the server's RSS and the idle sessions' private memory.
	pid := cmd.Process.Pid
	rss0 := status(pid, "VmRSS")
	list, _ := call("session_list", map[string]any{})
	have := len(list["sessions"].([]any))
	for i := 0; i < idle; i++ {
		if _, err := call("session_create", map[string]any{"session": fmt.Sprintf("idle%d", i)}); err != nil {
			return err
		}
	}
	rss1 := status(pid, "VmRSS")
	var priv []int64
	for _, p := range childrenRunning(pid, "session") {
		priv = append(priv, privateBytes(p))
	}
	slices.Sort(priv)

	fmt.Printf("`go run ./bench/sessionbench -n %d` on %s, %d cores; load average before %s, after %s. Default sandbox (workspace policy, run as nobody, a cgroup per session).\n\n",
		n, kernel(), runtimeCPUs(), load0, loadavg())
	fmt.Println("| row | what | median | p90 | ratio to clean python | note |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rows {
		ratio := float64(median(r.samples)) / float64(median(c0.samples))
		fmt.Printf("| %s | %s | %s | %s | %.2fx | %s |\n", r.id, r.name, ms(median(r.samples)), ms(pct(r.samples, 90)), ratio, r.note)
	}
	fmt.Println()
	fmt.Printf("- trivial cell: %.2fx clean python (target <= 0.3x, stretch 0.2x)\n", float64(median(s1.samples))/float64(median(c0.samples)))
	fmt.Printf("- session start, server side: %s with a ready fork server, %s back to back (target <= 20 ms); plain warm run r1 %s in the same run\n",
		ms(median(s2.samples)), ms(median(s3.samples)), ms(median(r1.samples)))
	if len(priv) > 0 {
		fmt.Printf("- idle session interpreter, private memory (smaps_rollup Private_Clean+Private_Dirty): median %.1f MB, max %.1f MB over %d sessions (target <= 8 MB beyond its fork server)\n",
			mb(priv[len(priv)/2]), mb(priv[len(priv)-1]), len(priv))
	}
	fmt.Printf("- %d idle sessions (after %d others) grew the server's own RSS by %.1f MB (%.1f -> %.1f MB; target <= 20 MB)\n", idle, have, mb(rss1-rss0), mb(rss0), mb(rss1))
	_ = pandasRows
	return nil
}

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

// childrenRunning lists the session interpreters among root's
// descendants: a cold one runs python -u .../code/HASH.py; a warm one is a
// fork of a fork server (driver-*.py) whose parent (its supervisor) and
// grandparent (the fork server) are too.
func childrenRunning(root int, _ string) []int {
	cmd := func(p int) string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		return string(b)
	}
	parent := map[int]int{}
	var all []int
	var walk func(int)
	walk = func(p int) {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, t := range tasks {
			data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, t.Name()))
			for _, f := range strings.Fields(string(data)) {
				c, _ := strconv.Atoi(f)
				parent[c] = p
				all = append(all, c)
				walk(c)
			}
		}
	}
	walk(root)
	var out []int
	for _, p := range all {
		c := cmd(p)
		warm := strings.Contains(c, "/warm/driver-") && strings.Contains(cmd(parent[p]), "/warm/driver-") && strings.Contains(cmd(parent[parent[p]]), "/warm/driver-")
		if strings.Contains(c, "/code/") || warm {
			out = append(out, p)
		}
	}
	return out
}

func privateBytes(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	var total int64
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "Private_Clean:" || f[0] == "Private_Dirty:") {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			total += kb << 10
		}
	}
	return total
}

func status(pid int, key string) int64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, key+":") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
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
	return c[min(len(c)-1, int(float64(len(c))*p/100))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
func mb(b int64) float64        { return float64(b) / (1 << 20) }

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return "Linux " + strings.TrimSpace(string(b))
}

func runtimeCPUs() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

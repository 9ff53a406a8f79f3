package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
)

// runCold measures the cold path only: every cold row twice, with
// launchers started ahead (the default) and without (--prestart 0), and
// the samples of all rows interleaved (one sample of each row per round),
// so that the machine's load falls on every row alike.
func runCold(n int, dir string) error {
	ctx := context.Background()
	tmp, ws, err := benchDirs(dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	load0 := loadavg()
	start := time.Now()

	newEng := func(name, python string, prestart int) (*engine.Engine, error) {
		return engine.New(engine.Config{Workspace: ws, StateDir: filepath.Join(tmp, name), Python: python, Prestart: prestart})
	}
	probe, err := newEng("state-probe", "", -1)
	if err != nil {
		return err
	}
	interp, err := probe.DefaultInterpreter(ctx)
	probe.Close()
	if err != nil {
		return err
	}
	py := interp.Path
	clean, err := cleanPython(py, filepath.Join(tmp, "clean-venv"))
	if err != nil {
		return fmt.Errorf("clean interpreter: %w", err)
	}
	bin := filepath.Join(tmp, "pyexec")
	build := exec.Command("go", "build", "-o", bin, "./cmd/pyexec")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build pyexec (run from the module root): %w", err)
	}

	type coldRow struct {
		row
		f func() error
	}
	var rows []*coldRow
	add := func(id, name string, f func() error) { rows = append(rows, &coldRow{row{id: id, name: name}, f}) }
	add("a0", "`python -c pass`, the default interpreter ("+py+")", func() error { return exec.Command(py, "-c", "pass").Run() })
	add("a", "`python -c pass`, a clean interpreter (a fresh venv of the default one)", func() error { return exec.Command(clean, "-c", "pass").Run() })

	print1 := engine.Request{Code: "print(1)"}
	for _, v := range []struct {
		id, what, python string
	}{{"c", "engine, cold, default sandbox", ""}, {"c2", "engine, cold, default sandbox, the clean interpreter", clean}} {
		for _, pre := range []struct {
			suffix, what string
			n            int
		}{{"", "launchers started ahead (default)", 0}, {"-", "`--prestart 0`: a launcher exec'd per run", -1}} {
			e, err := newEng("state-"+v.id+pre.suffix, v.python, pre.n)
			if err != nil {
				return err
			}
			defer e.Close()
			add(v.id+pre.suffix, v.what+", "+pre.what, func() error {
				res, err := e.Run(ctx, print1, nil)
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
				}
				return err
			})
		}
	}
	for _, v := range []struct {
		id, what string
		args     []string
	}{{"e0", "`run_python` print(1) via `pyexec mcp --warm 0` over stdio", nil}, {"e1", "`run_python` print(1) via `pyexec mcp --warm 0 --python CLEAN` over stdio", []string{"--python", clean}}} {
		for _, pre := range []struct {
			suffix, what string
			args         []string
		}{{"", "launchers started ahead (default)", nil}, {"-", "`--prestart 0`", []string{"--prestart", "0"}}} {
			call, stop, err := mcpCaller(ctx, bin, ws, filepath.Join(tmp, "state-"+v.id+pre.suffix), append(append([]string{"--warm", "0"}, v.args...), pre.args...)...)
			if err != nil {
				return err
			}
			defer stop()
			add(v.id+pre.suffix, v.what+", "+pre.what, call)
		}
	}

	for _, r := range rows { // warm-up
		for i := 0; i < 3; i++ {
			if err := r.f(); err != nil {
				return fmt.Errorf("%s: %w", r.id, err)
			}
		}
	}
	for i := 0; i < n; i++ {
		for _, r := range rows {
			t0 := time.Now()
			if err := r.f(); err != nil {
				return fmt.Errorf("%s: %w", r.id, err)
			}
			r.samples = append(r.samples, time.Since(t0))
		}
	}

	byID := map[string]*coldRow{}
	for _, r := range rows {
		byID[r.id] = r
	}
	base, base0 := median(byID["a"].samples), median(byID["a0"].samples)
	fmt.Printf("## pybench -cold: %s\n\n", start.UTC().Format(time.RFC3339))
	fmt.Printf("`go run ./bench/pybench -cold -n %d` on %s, %d cores, %s; Python %s (%s); samples interleaved row by row; load average before %s, after %s.\n\n",
		n, kernel(), runtime.NumCPU(), runtime.Version(), interp.Version, py, load0, loadavg())
	fmt.Println("| row | what | n | median | p95 | median / (a) clean | median / (a0) default | median - (a) |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		m := median(r.samples)
		fmt.Printf("| %s | %s | %d | %s | %s | %.3fx | %.3fx | %s |\n", r.id, r.name, len(r.samples), ms(m), ms(pct(r.samples, 95)), float64(m)/float64(base), float64(m)/float64(base0), ms(m-base))
	}
	fmt.Println()
	for _, id := range []string{"c", "c2", "e0", "e1"} {
		on, off := median(byID[id].samples), median(byID[id+"-"].samples)
		fmt.Printf("- %s: launchers started ahead save %s per run (%s -> %s)\n", id, ms(off-on), ms(off), ms(on))
	}
	fmt.Println("\nTarget: (e0) <= 1.3x (a) (the issue's cold row; e1 is the same with the clean interpreter, so its difference to (a) is pyexec's own share).")
	return nil
}

// mcpCaller starts `pyexec mcp` with args and returns a function that makes
// one run_python print(1) call.
func mcpCaller(ctx context.Context, bin, ws, state string, args ...string) (func() error, func(), error) {
	cmd := exec.Command(bin, append([]string{"mcp", "--workspace", ws, "--state-dir", state, "--log-level", "warn"}, args...)...)
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pybench", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, nil, err
	}
	call := func() error {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "print(1)"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %v", res.Content)
		}
		return err
	}
	return call, func() { sess.Close() }, nil
}

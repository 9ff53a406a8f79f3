// Command depsbench measures pyexec's dependency environments against uv
// itself, in one run on one machine, with local wheels and no index:
//
//   - warm: the same code run with two cached dependencies vs with none
//     (target: ratio at most 1.1);
//   - cold: a first run with two dependencies (nothing cached, not even
//     uv's wheel cache) vs `uv run --no-project --with A --with B python FILE`
//     under the same conditions (target: no slower than uv);
//   - confined: the same first run when the environment must be built
//     confined (the same two wheels named as file: requirements in the
//     workspace, which pyexec builds only in the run's sandbox, as the run
//     user, with a private uv cache), vs the trusted wheels-only pass.
//
// Usage: go run ./bench/depsbench [-warm 30] [-cold 5]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

func main() {
	launcher.MaybeRun()
	warmN := flag.Int("warm", 30, "warm iterations per row")
	coldN := flag.Int("cold", 5, "cold iterations per row")
	flag.Parse()
	if err := run(*warmN, *coldN); err != nil {
		fmt.Fprintln(os.Stderr, "depsbench:", err)
		os.Exit(1)
	}
}

var deps = []string{"pyexec-alpha", "pyexec-beta"}

const code = "import pyexec_alpha, pyexec_beta\nprint(pyexec_alpha.__version__)\n"
const plain = "print('2.0')\n"

func run(warmN, coldN int) error {
	ctx := context.Background()
	root, err := os.MkdirTemp("", "depsbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	wheelDir := filepath.Join(root, "wheels")
	if _, err := wheels.Build(wheelDir, wheels.Standard()...); err != nil {
		return err
	}
	ws := filepath.Join(root, "ws")
	os.MkdirAll(ws, 0o755)
	index := uvenv.IndexSettings{NoIndex: true, FindLinks: []string{wheelDir}, Offline: true}
	newEngine := func(state string) (*engine.Engine, error) {
		return engine.New(engine.Config{Workspace: ws, StateDir: state, Deps: engine.DepsConfig{Index: index}})
	}

	// Warm: one engine, environment built once before timing.
	eng, err := newEngine(filepath.Join(root, "state-warm"))
	if err != nil {
		return err
	}
	interp, err := eng.DefaultInterpreter(ctx)
	if err != nil {
		return err
	}
	uv, err := eng.Environments().UVPath()
	if err != nil {
		return err
	}
	once := func(e *engine.Engine, req engine.Request) (time.Duration, error) {
		start := time.Now()
		res, err := e.Run(ctx, req, nil)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("run failed: %s", res.Stderr)
		}
		return time.Since(start), err
	}
	if _, err := once(eng, engine.Request{Code: code, Dependencies: deps}); err != nil {
		return err
	}
	var warmDeps, warmNone []time.Duration
	for range warmN { // interleaved, so drift in machine load hits both rows
		d, err := once(eng, engine.Request{Code: code, Dependencies: deps})
		if err != nil {
			return err
		}
		warmDeps = append(warmDeps, d)
		if d, err = once(eng, engine.Request{Code: plain}); err != nil {
			return err
		}
		warmNone = append(warmNone, d)
	}

	// Cold: a fresh state dir (so a fresh uv cache too) for every pyexec
	// run, a fresh UV_CACHE_DIR for every uv run.
	script := filepath.Join(ws, "bench.py")
	if err := os.WriteFile(script, []byte(code), 0o644); err != nil {
		return err
	}
	// The same wheels inside the workspace, as local requirements: these
	// go the confined way.
	local := filepath.Join(ws, "wheels")
	if _, err := wheels.Build(local, wheels.Standard()...); err != nil {
		return err
	}
	localDeps := []string{
		"pyexec-alpha @ file://" + filepath.Join(local, "pyexec_alpha-2.0-py3-none-any.whl"),
		"pyexec-beta @ file://" + filepath.Join(local, "pyexec_beta-1.0-py3-none-any.whl"),
	}
	var coldPyexec, coldUV, coldConfined []time.Duration
	for i := range coldN {
		e, err := newEngine(filepath.Join(root, fmt.Sprintf("state-cold-%d", i)))
		if err != nil {
			return err
		}
		// A started server has probed its default interpreter already.
		if _, err := e.DefaultInterpreter(ctx); err != nil {
			return err
		}
		d, err := once(e, engine.Request{Code: code, Dependencies: deps})
		if err != nil {
			return err
		}
		coldPyexec = append(coldPyexec, d)
		e.Close() // background sealing is not part of the first run, but must not overlap the uv run

		cmd := exec.Command(uv, "run", "--no-project", "--no-index", "--find-links", wheelDir, "--offline",
			"--python", interp.Path, "--with", deps[0], "--with", deps[1], "python", script)
		cmd.Env = append(os.Environ(), "UV_CACHE_DIR="+filepath.Join(root, fmt.Sprintf("uvcache-%d", i)), "UV_PYTHON_DOWNLOADS=never")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("uv run: %v: %s", err, out)
		}
		coldUV = append(coldUV, time.Since(start))

		c, err := newEngine(filepath.Join(root, fmt.Sprintf("state-confined-%d", i)))
		if err != nil {
			return err
		}
		if _, err := c.DefaultInterpreter(ctx); err != nil {
			return err
		}
		if d, err = once(c, engine.Request{Code: code, Dependencies: localDeps}); err != nil {
			return err
		}
		coldConfined = append(coldConfined, d)
		c.Close()
	}

	wd, wn := median(warmDeps), median(warmNone)
	cp, cu, cc := median(coldPyexec), median(coldUV), median(coldConfined)
	fmt.Printf("interpreter: %s (Python %s); uv: %s\n\n", interp.Path, interp.Version, uv)
	fmt.Println("| case | runs | median | p95 | ratio |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| warm: 2 cached dependencies | %d | %s | %s | %.2f x no deps (target <= 1.10) |\n", warmN, ms(wd), ms(p95(warmDeps)), float64(wd)/float64(wn))
	fmt.Printf("| warm: no dependencies | %d | %s | %s | 1.00 |\n", warmN, ms(wn), ms(p95(warmNone)))
	fmt.Printf("| cold: pyexec first run, 2 dependencies | %d | %s | %s | %.2f x uv run (target <= 1.00) |\n", coldN, ms(cp), ms(p95(coldPyexec)), float64(cp)/float64(cu))
	fmt.Printf("| cold: uv run --no-project --with A --with B | %d | %s | %s | 1.00 |\n", coldN, ms(cu), ms(p95(coldUV)))
	fmt.Printf("| cold: pyexec first run, 2 local (file:) dependencies, built confined | %d | %s | %s | %.2f x the wheels-only first run |\n", coldN, ms(cc), ms(p95(coldConfined)), float64(cc)/float64(cp))
	return nil
}

func median(ds []time.Duration) time.Duration { return pct(ds, 0.5) }
func p95(ds []time.Duration) time.Duration    { return pct(ds, 0.95) }

func pct(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

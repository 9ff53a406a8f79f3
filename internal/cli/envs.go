package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/quality"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// depsFlags configure the uv environments runs with dependencies use.
type depsFlags struct {
	envCacheMax byteSize
	indexURL    string
	findLinks   listFlag
	noIndex     bool
	offline     bool
	projectSync string
	noProject   bool
	uv          string
	ruff        string
}

func (f *depsFlags) register(fs *flag.FlagSet) {
	f.envCacheMax = byteSize(uvenv.DefaultMaxBytes)
	fs.Var(&f.envCacheMax, "env-cache-max", "size cap of the dependency environment cache, like 5GiB or 500MB; least recently used envs are evicted (0: no cap)")
	fs.StringVar(&f.indexURL, "index-url", "", "package index uv resolves dependencies from (default: uv's, or UV_INDEX_URL)")
	fs.Var(&f.findLinks, "find-links", "directory or URL of extra distributions for uv (repeatable, comma-separated in the environment variable)")
	fs.BoolVar(&f.noIndex, "no-index", false, "resolve dependencies only from --find-links, never from an index")
	fs.BoolVar(&f.offline, "offline", false, "never let uv access the network (only its cache and --find-links)")
	fs.StringVar(&f.projectSync, "project-sync", "", `how project environments follow uv.lock: "" like uv run (re-lock when outdated), "locked" (fail when outdated) or "frozen" (install the lock as is)`)
	fs.BoolVar(&f.noProject, "no-project", false, "do not run scripts inside a pyproject.toml project in that project's environment")
	fs.StringVar(&f.uv, "uv", "", "uv binary used to build environments (default: found on PATH, past pyenv shims)")
	fs.StringVar(&f.ruff, "ruff", "", "ruff binary format_code and lint_code run (default: ruff "+quality.RuffVersion+", installed once by uv into the pyexec-ruff tool environment)")
}

// ruffPath checks --ruff: an existing executable, made absolute.
func (f *depsFlags) ruffPath() (string, error) {
	if f.ruff == "" {
		return "", nil
	}
	p, err := exec.LookPath(f.ruff)
	if err != nil {
		return "", fmt.Errorf("--ruff %s: %w", f.ruff, err)
	}
	if p, err = filepath.Abs(p); err != nil {
		return "", fmt.Errorf("--ruff %s: %w", f.ruff, err)
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	return p, nil
}

func (f *depsFlags) config() engine.DepsConfig {
	max := int64(f.envCacheMax)
	if max == 0 {
		max = -1 // no cap
	}
	return engine.DepsConfig{
		UV:          f.uv,
		MaxBytes:    max,
		ProjectSync: f.projectSync,
		NoProjects:  f.noProject,
		Index: uvenv.IndexSettings{
			IndexURL: f.indexURL, FindLinks: f.findLinks, NoIndex: f.noIndex, Offline: f.offline,
		},
	}
}

// envsUsage is the synopsis of `pyexec envs`.
const envsUsage = `Usage:
  pyexec envs list [--json]
  pyexec envs create NAME --with PKG [--with PKG...] [--python-version 3.12] [--json]
  pyexec envs delete NAME [--json]
  pyexec envs prune [--all] [--unused-for DURATION] [--max-size SIZE] [--json]
Named environments (create) are pinned: prune and LRU eviction never remove them.`

// runEnvs lists, creates, deletes and prunes dependency environments.
func runEnvs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || !slices.Contains([]string{"list", "create", "delete", "prune"}, args[0]) {
		fmt.Fprintln(stderr, envsUsage)
		return 2
	}
	sub := args[0]
	var (
		ef        engineFlags
		asJSON    bool
		all       bool
		unusedFor time.Duration
		maxSize   byteSize
		with      listFlag
		pyVersion string
	)
	synopsis := "envs " + sub + " [flags]"
	if sub == "create" || sub == "delete" {
		synopsis = "envs " + sub + " NAME [flags]"
	}
	fs := newFlagSet("envs "+sub, synopsis, stderr, engineEnv)
	ef.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	switch sub {
	case "prune":
		fs.BoolVar(&all, "all", false, "remove every environment not in use (named ones stay)")
		fs.DurationVar(&unusedFor, "unused-for", 0, "remove environments not used for this long, like 168h")
		fs.Var(&maxSize, "max-size", "evict least recently used environments until the cache fits this size, like 2GiB")
	case "create":
		fs.Var(&with, "with", "a requirement to install (PEP 508; repeatable)")
		fs.StringVar(&pyVersion, "python-version", "", "installed Python version to build on (default: the default interpreter)")
	}
	rest := args[1:]
	name := ""
	if (sub == "create" || sub == "delete") && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if code, ok := parseFlags(fs, rest, engineEnv, stderr); !ok {
		return code
	}
	if (sub == "create" || sub == "delete") && name == "" {
		fmt.Fprintf(stderr, "pyexec envs %s: give the environment's name first\n%s\n", sub, envsUsage)
		return 2
	}
	local, err := ef.executor()
	if err != nil {
		fmt.Fprintf(stderr, "pyexec envs: %v\n", err)
		return 1
	}
	defer local.Engine().Close()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "pyexec envs %s: %v\n", sub, err)
		return 1
	}
	switch sub {
	case "prune":
		if !all && unusedFor == 0 && maxSize == 0 {
			fmt.Fprintln(stderr, "pyexec envs prune: say what to remove: --all, --unused-for or --max-size")
			return 2
		}
		res, err := local.Engine().Environments().Prune(ctx, uvenv.PruneOptions{All: all, UnusedFor: unusedFor, MaxBytes: int64(maxSize)})
		if err != nil {
			return fail(err)
		}
		if asJSON {
			return writeJSON(stdout, res)
		}
		fmt.Fprintf(stdout, "removed %d environments (%s); kept %d (%s)\n", len(res.Removed), byteSize(res.FreedBytes), res.Kept, byteSize(res.KeptBytes))
		return 0
	case "create":
		t := &terminal{stderr: stderr}
		e, err := local.CreateEnv(ctx, executor.EnvCreateRequest{Name: name, Dependencies: with, PythonVersion: pyVersion}, func(p executor.Progress) {
			t.mu.Lock()
			fmt.Fprintf(stderr, "pyexec: %s\n", p.Message)
			t.mu.Unlock()
		})
		if err != nil {
			return fail(err)
		}
		if asJSON {
			return writeJSON(stdout, e)
		}
		fmt.Fprintf(stdout, "created %s: Python %s, %s, %s\nrun in it with: pyexec run --use-env %s script.py\n", name, e.PythonVersion, strings.Join(e.Resolved, " "), byteSize(e.SizeBytes), name)
		return 0
	case "delete":
		res, err := local.DeleteEnv(ctx, name)
		if err != nil {
			return fail(err)
		}
		if asJSON {
			return writeJSON(stdout, res)
		}
		fmt.Fprintf(stdout, "deleted %s", name)
		if res.Removed {
			fmt.Fprintf(stdout, " (%s freed)", byteSize(res.FreedBytes))
		}
		if res.Note != "" {
			fmt.Fprintf(stdout, "; %s", res.Note)
		}
		fmt.Fprintln(stdout)
		return 0
	}
	list, err := local.Envs(ctx)
	if err != nil {
		return fail(err)
	}
	if asJSON {
		return writeJSON(stdout, list.Envs)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tNAMES\tSTRATEGY\tPYTHON\tSIZE\tLAST USED\tIN USE\tPACKAGES")
	for _, e := range list.Envs {
		what := strings.Join(e.Resolved, " ")
		if e.ProjectDir != "" {
			what = e.ProjectDir + ": " + what
		}
		if !e.Built {
			what = strings.Join(e.Requirements, " ") + " (not built: rebuilt at next use)"
		}
		names, last := "-", "-"
		if len(e.Names) > 0 {
			names = strings.Join(e.Names, ",")
		}
		if !e.LastUsed.IsZero() {
			last = e.LastUsed.Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%v\t%s\n", e.Key, names, e.Strategy, e.PythonVersion, byteSize(e.SizeBytes), last, e.InUse, what)
	}
	w.Flush()
	return 0
}

func writeJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return 1
	}
	return 0
}

// Environment shows environment build phases at the terminal (on stderr,
// before the script starts), so a first run's pause is explained.
func (t *terminal) Environment(phase, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if detail == "" {
		detail = phase
	}
	fmt.Fprintf(t.stderr, "pyexec: %s\n", detail)
}

// listFlag collects a repeatable flag; one value may hold several,
// comma-separated (as environment variables do).
type listFlag []string

func (f *listFlag) String() string { return strings.Join(*f, ",") }

func (f *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*f = append(*f, s)
		}
	}
	return nil
}

// byteSize is a size flag: bytes, or a number with a unit (KB, MB, GB, TB
// as powers of 1000; KiB, MiB, GiB, TiB as powers of 1024).
type byteSize int64

func (b byteSize) String() string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(b) >= u.size && int64(b)%u.size == 0 {
			return fmt.Sprintf("%d%s", int64(b)/u.size, u.suffix)
		}
	}
	n := float64(b)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if n < 1024 || u == "GiB" {
			if u == "B" {
				return fmt.Sprintf("%d B", int64(b))
			}
			return fmt.Sprintf("%.1f %s", n, u)
		}
		n /= 1024
	}
	return ""
}

func (b *byteSize) Set(v string) error {
	s := strings.TrimSpace(v)
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(strings.ToLower(s), strings.ToLower(u.suffix)) {
			s, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want a size like 5GiB, 500MB or 1048576, got %q", v)
	}
	*b = byteSize(n * mult)
	return nil
}

//go:build linux

package engine

// Adaptive preload: imports paid once.
//
// What agents run is rarely print(1): `import pandas` costs a quarter of a
// second, and every run pays it again unless the operator guessed it with
// --preload. Instead, each warm run reports (driver.py, after the run's own
// code) the top-level modules it imported from the interpreter's site dirs,
// never from the workspace or a PYTHONPATH the request set. When one of them
// was imported by Hits of the last Window runs of a key (interpreter and
// sandbox: a uv environment is an interpreter of its own), a replacement
// zygote is started in the background with it imported too, and once it is
// ready the older zygotes of the key are retired (they finish the runs they
// have). The replacement imports each adaptive module on its own, timed; a
// module that fails to import or starts a thread fails it ("auto MODULE:
// why") and is excluded; one cheaper than MinCost stays out of later
// zygotes; a zygote past the memory budget is retired and its new modules
// are excluded. Modules known to be unsafe to fork are never tried.
//
// What a run reports is untrusted (the run could have written anything
// there): it only ever names a module a zygote may try to import from its
// own sys.path, confined as the runs are, and at most MaxModules of them.

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// forkUnsafe lists top-level packages that must not be imported before a
// fork: they start thread pools, hold connections or a display, or say
// themselves that forking after import is unsupported.
var forkUnsafe = map[string]string{
	"torch": "thread pools and CUDA state do not survive fork", "tensorflow": "thread pools do not survive fork",
	"jax": "warns that fork after import deadlocks", "jaxlib": "warns that fork after import deadlocks",
	"grpc": "its threads and sockets do not survive fork", "ray": "starts and connects to services",
	"pyspark": "starts a JVM gateway", "cupy": "CUDA state does not survive fork",
	"tkinter": "holds a display connection", "turtle": "holds a display connection",
	"pygame": "holds a display connection", "IPython": "an interactive shell, not a library",
	"ipykernel": "an interactive kernel, not a library", "multiprocess": "manages processes itself",
	"dask": "its schedulers start threads", "distributed": "starts threads and connections",
	"numba": "compiles with threads on first use", "mpi4py": "initialises MPI at import",
}

// adaptive is what a key's zygotes learned (warmPool.mu).
type adaptive struct {
	interp   string
	recent   [][]string // the modules of the last Window runs, a ring
	next     int
	preload  []string // what new zygotes of the key import (after the operator's)
	gen      int      // bumped whenever preload grows
	cost     map[string]float64
	excluded map[string]string
	capped   map[string]bool // candidates waiting for room under MaxModules
	rss      int64
	starting *zygote // the replacement under way
}

func (w *warmPool) autoLocked(key, interp string) *adaptive {
	if w.auto == nil {
		w.auto = map[string]*adaptive{}
	}
	a := w.auto[key]
	if a == nil {
		a = &adaptive{interp: interp, cost: map[string]float64{}, excluded: map[string]string{}, capped: map[string]bool{}}
		w.auto[key] = a
	}
	return a
}

// preloadArgLocked is the driver's PRELOAD argument for a new zygote of
// key ("operator;adaptive"), recording in z what it will import.
func (w *warmPool) preloadArgLocked(key, interp string, z *zygote) string {
	arg := strings.Join(w.cfg.Preload, ",")
	if w.cfg.Auto == nil {
		return arg
	}
	a := w.autoLocked(key, interp)
	z.auto, z.gen = slices.Clone(a.preload), a.gen
	if len(z.auto) == 0 {
		return arg
	}
	return arg + ";" + strings.Join(z.auto, ",")
}

// learn hears what a run of z imported, and starts a replacement zygote
// when a module became worth preloading.
func (w *warmPool) learn(z *zygote, p *prepared, mods []string) {
	cfg := w.cfg.Auto
	if cfg == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || z.retired {
		return
	}
	a := w.autoLocked(z.key, p.interp.Path)
	if len(mods) > maxReportedModules {
		mods = mods[:maxReportedModules]
	}
	if len(a.recent) < cfg.Window {
		a.recent = append(a.recent, mods)
	} else {
		a.recent[a.next] = mods
		a.next = (a.next + 1) % cfg.Window
	}
	if a.starting != nil {
		return // one replacement at a time; the ring keeps counting
	}
	hits := map[string]int{}
	for _, run := range a.recent {
		for _, m := range run {
			hits[m]++
		}
	}
	prev := slices.Clone(a.preload)
	var add []string
	for m, n := range hits {
		if n < cfg.Hits || slices.Contains(a.preload, m) || slices.Contains(w.cfg.Preload, m) || z.modules[m] {
			continue
		}
		if _, ok := a.excluded[m]; ok {
			continue
		}
		top, _, _ := strings.Cut(m, ".")
		if why, bad := forkUnsafe[top]; bad {
			a.excluded[m] = "unsafe to fork: " + why
			continue
		}
		if z.modules[top] && !strings.Contains(m, ".") {
			continue
		}
		add = append(add, m)
	}
	// In the order this run imported them: a module imported first is the
	// one the code asked for; what follows it is often its dependencies,
	// which it imports anyway once preloaded (and then no run reports).
	pos := func(m string) int {
		if i := slices.Index(mods, m); i >= 0 {
			return i
		}
		return len(mods)
	}
	sort.Slice(add, func(i, j int) bool {
		if pi, pj := pos(add[i]), pos(add[j]); pi != pj {
			return pi < pj
		}
		return add[i] < add[j]
	})
	if len(add) > perReplacement {
		add = add[:perReplacement]
	}
	for _, m := range add {
		if len(a.preload) >= cfg.MaxModules {
			a.capped[m] = true // tried again when a slot frees up
			continue
		}
		delete(a.capped, m)
		a.preload = append(a.preload, m)
	}
	// Costliest first: what a costly module imports (a dependency that was
	// preloaded on its own) then costs nothing and leaves the list.
	sort.SliceStable(a.preload, func(i, j int) bool { return a.cost[a.preload[i]] > a.cost[a.preload[j]] })
	if !slices.ContainsFunc(a.preload, func(m string) bool { return !slices.Contains(z.auto, m) }) {
		return // z imports all that is wanted (after a failed replacement, perhaps not)
	}
	a.gen++
	r := w.addLocked(z.key, p)
	if r == nil {
		a.preload = prev
		return
	}
	r.prevAuto, r.replacement = prev, true
	a.starting = r
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		select {
		case <-r.ready:
		case <-r.dead:
		}
		w.replaced(a, r)
	}()
}

// replaced takes over from the older zygotes of r's key once r is ready, or
// learns from its failure.
func (w *warmPool) replaced(a *adaptive, r *zygote) {
	cfg := w.cfg.Auto
	w.mu.Lock()
	defer w.mu.Unlock()
	a.starting = nil
	if r.err != nil {
		w.replacementFailed(a, r)
		return
	}
	for m, ms := range r.costs {
		if ms < 0 {
			a.excluded[m] = "imported anyway by a module preloaded before it"
			a.preload = slices.DeleteFunc(a.preload, func(x string) bool { return x == m })
			continue
		}
		a.cost[m] = ms
		if time.Duration(ms*float64(time.Millisecond)) < cfg.MinCost {
			// Cheap: not worth a replacement's memory; r keeps it.
			a.excluded[m] = fmt.Sprintf("imports in %.1f ms, under %s", ms, cfg.MinCost)
			a.preload = slices.DeleteFunc(a.preload, func(x string) bool { return x == m })
		}
	}
	a.rss = r.rss
	if r.rss > cfg.MemoryBytes {
		for _, m := range r.auto {
			if !slices.Contains(r.prevAuto, m) {
				a.excluded[m] = fmt.Sprintf("memory budget: a warm interpreter with it holds %d MiB, over %d MiB", r.rss>>20, cfg.MemoryBytes>>20)
			}
		}
		a.preload = slices.DeleteFunc(a.preload, func(x string) bool { _, ex := a.excluded[x]; return ex })
		w.retireLocked(r)
		return
	}
	if r.retired || w.closed {
		return
	}
	for _, old := range slices.Clone(w.zs[r.key]) {
		if old != r && old.gen < r.gen {
			w.retireLocked(old) // it finishes the runs it has
		}
	}
}

// replacementFailed excludes the module that made r fail (the driver names
// it: "auto MODULE: why"), or r's new modules when it does not say.
func (w *warmPool) replacementFailed(a *adaptive, r *zygote) {
	msg := r.err.Error()
	bad := map[string]string{}
	if i := strings.Index(msg, "auto "); i >= 0 {
		rest := msg[i+len("auto "):]
		if m, why, ok := strings.Cut(rest, ": "); ok && slices.Contains(r.auto, m) {
			bad[m] = firstLine(why)
		}
	}
	if len(bad) == 0 {
		for _, m := range r.auto {
			if !slices.Contains(r.prevAuto, m) {
				bad[m] = "the warm interpreter failed with it: " + firstLine(msg)
			}
		}
	}
	for m, why := range bad {
		a.excluded[m] = why
	}
	a.preload = slices.DeleteFunc(a.preload, func(x string) bool { _, ex := bad[x]; return ex })
	a.gen++
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// maxReportedModules bounds one run's report (driver.py's _MAX_REPORTED),
// and perReplacement how many modules one replacement adds.
const (
	maxReportedModules = 32
	perReplacement     = 3
)

// preloadStats is PreloadStats now (nil when adaptive preload is off).
func (w *warmPool) preloadStats() *PreloadStats {
	cfg := w.cfg.Auto
	if cfg == nil {
		return nil
	}
	st := &PreloadStats{MinCostMS: float64(cfg.MinCost) / float64(time.Millisecond), MaxModules: cfg.MaxModules, MemoryBytes: cfg.MemoryBytes}
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.auto))
	for k := range w.auto {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := w.auto[k]
		s := InterpreterPreloadStat{Interpreter: a.interp, Preloaded: slices.Clone(a.preload), RSSBytes: a.rss, Starting: a.starting != nil}
		if s.Preloaded == nil {
			s.Preloaded = []string{}
		}
		if len(a.cost) > 0 {
			s.CostMS = map[string]float64{}
			for m, c := range a.cost {
				s.CostMS[m] = float64(int64(c*10)) / 10
			}
		}
		for m, why := range a.excluded {
			s.Excluded = append(s.Excluded, PreloadExclusion{Module: m, Reason: why})
		}
		for m := range a.capped {
			s.Excluded = append(s.Excluded, PreloadExclusion{Module: m, Reason: fmt.Sprintf("waiting: the preload cap (%d modules) is reached", cfg.MaxModules)})
		}
		sort.Slice(s.Excluded, func(i, j int) bool { return s.Excluded[i].Module < s.Excluded[j].Module })
		st.PerPython = append(st.PerPython, s)
	}
	return st
}

package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "embed"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/workspace"
)

// Warm interpreters.
//
// A cold run pays a whole interpreter start (15-80 ms here, most of it site
// and .pth imports) before the first line of the script. The warm path pays
// it once per interpreter: a fork server ("zygote", driver.py) is started
// through the ordinary launcher, imports what a start imports (plus
// --preload modules), and keeps Spares runs pre-forked. A pre-forked run is a
// supervisor S (process group leader, child subreaper: the warm path's
// per-run launcher) and its child G, which waits on the control socket for
// one request. The server hands G the request and the run's pipes
// (SCM_RIGHTS); G becomes `python -u FILE ARGS...` in the request's cwd and
// environment and runs the file as __main__. G reports "started" on the
// run's status pipe and hands the pipe to S, which sleeps in wait4 through
// the run and reports "exit" with the tree's rusage once every process of
// the run is reaped, as the launcher does (TERM forwarding, grace, KILL
// sweeps included). No fork and no wakeup of S sits on the request's path:
// the zygote forks the next spare pair while the run goes on, or, for a
// confined zygote (one run at a time), S forks the next G once the run is
// over and serves it too.
//
// Why a fork server and not pre-started interpreters: a pool entry started
// from scratch costs a full interpreter start of CPU to refill, so under a
// sequential stream of requests it can be no faster than cold for long; a
// fork costs about a millisecond.
//
// A run uses the warm path only when a cold start would be identical:
// argv is exactly [interpreter, -u, FILE, ARGS...], no variable read at
// interpreter startup (PYTHON*, LANG, LC_*, HOME, LD_*, MALLOC_*, ...)
// differs from the zygote's (PYTHONPATH is applied by the driver unless a
// directory on it shadows a startup module), no string or source holds a
// NUL, and at most maxExtraFiles extra files. Everything else runs cold,
// and so does a request that finds no ready zygote (one is started in the
// background for next time).
//
// Confinement is the same as a cold run's (see sandbox/warm.go): the zygote
// is started by the launcher under the runs' sandbox settings and identity
// with grants covering every run it forks (sandbox.Covers), so its forks
// inherit the run-as user, namespaces, seccomp and rlimits; per run, the
// server creates the cgroup and the Landlock ruleset and G joins and stacks
// them before the run's first instruction. A confined zygote serves one run
// at a time, because its runs share its private /dev/shm (and PID and
// network namespaces): S empties /dev/shm after each run, and concurrent
// runs get zygotes of their own, up to PerInterpreter per key.
//
// Zygotes are keyed by interpreter and sandbox (settings, identity,
// workspace, hidden trees), retired when idle, when a directory on their
// sys.path changes, when a run needs a path outside their grants (the
// replacement's grants include it), or LRU beyond MaxInterpreters; a retired
// zygote lets its runs in flight finish.

//go:embed driver.py
var driverSource []byte

// WarmConfig configures warm interpreters.
type WarmConfig struct {
	// Spares is how many runs each warm interpreter keeps pre-forked and
	// ready; 0 disables warm interpreters (every run starts cold).
	Spares int
	// Preload lists modules each warm interpreter imports before it forks
	// (e.g. numpy,pandas): runs find them imported.
	Preload []string
	// MaxInterpreters bounds how many warm interpreters are kept in all;
	// the least recently used is retired. Default 4 (at least
	// PerInterpreter).
	MaxInterpreters int
	// PerInterpreter bounds how many warm interpreters one interpreter and
	// sandbox may have at once. A confined one serves one run at a time, so
	// this is how many confined runs can start warm concurrently. Default:
	// the number of CPUs, at least 2.
	PerInterpreter int
	// IdleTimeout retires a warm interpreter unused for this long.
	// Default 10 minutes.
	IdleTimeout time.Duration

	// wait makes a run wait for its warm interpreter to be ready instead of
	// running cold meanwhile (tests use it to exercise the warm path).
	wait bool
	// off keeps warm interpreters off even when tests force them on.
	off bool
	// busyWait and shortRun replace the constants of the same names (tests).
	busyWait, shortRun time.Duration
	// waiting counts runs waiting for a busy key (tests watch it).
	waiting *atomic.Int32
}

// WarmStats counts how runs were started.
type WarmStats struct {
	Warm        uint64            `json:"warm" jsonschema:"Runs forked from a warm interpreter."`
	Cold        uint64            `json:"cold" jsonschema:"Runs that started a fresh interpreter."`
	ColdReasons map[string]uint64 `json:"cold_reasons,omitempty" jsonschema:"Why runs started cold, with counts (e.g. a warm interpreter still starting, startup environment differs)."`
	Zygotes     int               `json:"zygotes" jsonschema:"Warm interpreters (fork servers) running now."`
}

// runProcess is a started run: a launcher, or a warm supervisor.
type runProcess interface {
	Done() <-chan struct{}
	Terminate()
	Wait() (launcher.Event, error)
}

// startProcess starts p warm when it can, cold otherwise.
func (e *Engine) startProcess(p *prepared, opts launcher.Options, warm bool) (runProcess, error) {
	spec := launcher.Spec{Argv: p.argv, Env: p.env, Dir: p.dir, Grace: e.cfg.KillGrace, ExtraFiles: len(p.extraFiles), Sandbox: p.sandbox}
	if e.warm != nil && warm {
		if r := e.warm.start(p, opts); r != nil {
			return r, nil
		}
	}
	spec.Env = e.coldEnv(spec.Env) // pyrt.go
	proc, err := launcher.Start(spec, opts)
	if err != nil {
		return nil, err
	}
	return proc, nil
}

// closeWarm stops the warm interpreters (runs still in flight on them are
// killed); Engine.Close calls it.
func (e *Engine) closeWarm() {
	if e.warm != nil {
		e.warm.close()
	}
}

// WarmStatsIfOn is WarmStats, or nil when warm interpreters are off.
func (e *Engine) WarmStatsIfOn() *WarmStats {
	if e.warm == nil {
		return nil
	}
	st := e.warm.statsSnapshot()
	return &st
}

// WarmStats reports how runs were started so far.
func (e *Engine) WarmStats() WarmStats {
	if e.warm == nil {
		return WarmStats{}
	}
	return e.warm.statsSnapshot()
}

// warmPool holds the zygotes, by key (warmKey).
type warmPool struct {
	e   *Engine
	cfg WarmConfig

	mu       sync.Mutex
	zs       map[string][]*zygote
	freed    chan struct{}       // closed (and replaced) whenever a zygote is released
	grants   map[string][]string // per key: read-only paths new zygotes are granted
	failedAt map[string]time.Time
	closed   bool
	bg       sync.WaitGroup
	quit     chan struct{}

	driverOnce sync.Once
	driverPath string
	driverErr  error

	confine  sandbox.Warm   // per-run confinement of warm runs
	cleanups sync.WaitGroup // background cleanups of finished runs

	warmRuns, coldRuns atomic.Uint64
	reasonsMu          sync.Mutex
	reasons            map[string]uint64
}

// forcedWarm, when set (by tests), is the warm configuration of every engine
// whose Config leaves Warm zero; engines made that way are tracked so the
// test binary can close them.
var (
	forcedWarm    *WarmConfig
	forcedMu      sync.Mutex
	forcedEngines []*Engine
)

const retryAfterFailure = 30 * time.Second

func newWarmPool(e *Engine) *warmPool {
	cfg := e.cfg.Warm
	if cfg.Spares <= 0 && !cfg.off && forcedWarm != nil && len(cfg.Preload) == 0 && cfg.MaxInterpreters == 0 {
		cfg = *forcedWarm
		forcedMu.Lock()
		forcedEngines = append(forcedEngines, e)
		forcedMu.Unlock()
	}
	if cfg.Spares <= 0 {
		return nil
	}
	if cfg.PerInterpreter <= 0 {
		cfg.PerInterpreter = max(2, runtime.NumCPU())
	}
	if cfg.MaxInterpreters <= 0 {
		cfg.MaxInterpreters = max(4, cfg.PerInterpreter)
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.busyWait <= 0 {
		cfg.busyWait = busyWait
	}
	if cfg.shortRun == 0 {
		cfg.shortRun = shortRun
	}
	w := &warmPool{e: e, cfg: cfg, zs: map[string][]*zygote{}, freed: make(chan struct{}), grants: map[string][]string{}, failedAt: map[string]time.Time{},
		quit: make(chan struct{}), reasons: map[string]uint64{}}
	w.bg.Add(1)
	go w.janitor()
	// Warm the default interpreter right away: the first request should
	// already find it ready.
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		// A default request, prepared as a run would be, names the zygote
		// (key, sandbox and grants) the server's default runs need.
		p, err := e.prepare(context.Background(), &Request{Code: "pass"}, nil, Extras{})
		if err != nil {
			return
		}
		defer os.RemoveAll(p.tmpDir)
		defer p.uv.done()
		if w.ineligible(p) != "" {
			return
		}
		key := warmKey(p)
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.closed && len(w.zs[key]) == 0 {
			w.startLocked(key, p)
		}
	}()
	return w
}

func (w *warmPool) cold(reason string) *warmRun {
	w.coldRuns.Add(1)
	w.reasonsMu.Lock()
	w.reasons[reason]++
	w.reasonsMu.Unlock()
	return nil
}

func (w *warmPool) statsSnapshot() WarmStats {
	s := WarmStats{Warm: w.warmRuns.Load(), Cold: w.coldRuns.Load(), ColdReasons: map[string]uint64{}}
	w.reasonsMu.Lock()
	for k, v := range w.reasons {
		s.ColdReasons[k] = v
	}
	w.reasonsMu.Unlock()
	w.mu.Lock()
	for _, l := range w.zs {
		s.Zygotes += len(l)
	}
	w.mu.Unlock()
	return s
}

// start runs p on a warm interpreter, or returns nil to have it run cold.
func (w *warmPool) start(p *prepared, opts launcher.Options) *warmRun {
	if reason := w.ineligible(p); reason != "" {
		return w.cold(reason)
	}
	z, reason := w.acquire(p)
	if z == nil {
		return w.cold(reason)
	}
	var box *sandbox.WarmRun
	if p.sandbox != nil {
		var err error
		if box, err = w.confine.Prepare(*p.sandbox, z.report, int(z.pid.Load())); err != nil {
			// The cold start that follows reports (or fails on) the cause.
			w.release(z)
			return w.cold("warm confinement could not be prepared")
		}
	}
	w.warmRuns.Add(1)
	r, err := z.start(p, opts, w.e.cfg.KillGrace, box, warmHooks{
		release: func() { w.release(z) },
		cleanup: w.background,
		lost: func() {
			// Nothing of the run ran: it starts cold (see execute).
			w.warmRuns.Add(^uint64(0))
			w.cold("warm interpreter lost")
			w.retire(z)
		},
	})
	if err != nil {
		// The request could not be sent: the zygote is gone (or going).
		// Retire it and run cold; a new one starts with the next request.
		w.warmRuns.Add(^uint64(0))
		if box != nil {
			box.Close()
		}
		w.release(z)
		w.retire(z)
		return w.cold("warm interpreter lost")
	}
	return r
}

// ineligible says why p cannot run warm ("" when it can).
func (w *warmPool) ineligible(p *prepared) string {
	if len(p.argv) < 3 || p.argv[0] != p.interp.Path || p.argv[1] != "-u" {
		return "interpreter options"
	}
	if !eligibleVersion(p.interp.Version) {
		return "python older than 3.8"
	}
	if len(p.extraFiles) > maxExtraFiles {
		return "too many extra files"
	}
	size := len(p.dir)
	for _, s := range p.argv {
		size += len(s) + 1
		if strings.IndexByte(s, 0) >= 0 {
			return "NUL in argv"
		}
	}
	for _, s := range p.env {
		size += len(s) + 1
		if strings.IndexByte(s, 0) >= 0 {
			return "NUL in env"
		}
	}
	if size > maxWarmRequest {
		return "request too large"
	}
	if p.sourceNUL {
		// How the file tokenizer treats NUL bytes changed within 3.11.x
		// (older ones stop the line there, newer ones raise SyntaxError);
		// compile() in the driver cannot reproduce both.
		return "NUL in source"
	}
	return ""
}

// warmKey names the zygotes a run can use: its interpreter and what the
// zygote is confined with (settings, identity, workspace, hidden trees).
// Whether a zygote's grants cover the run's paths is checked per run.
func warmKey(p *prepared) string {
	if p.sandbox == nil {
		return p.interp.Path
	}
	s := p.sandbox
	settings := s.Settings
	settings.Limits = settings.Limits.WithDefaults()
	settings.Limits.CPUSeconds = 0 // set per run
	b, _ := json.Marshal(struct {
		Settings  sandbox.Settings
		RunAs     *sandbox.Credential
		Required  bool
		Workspace string
		Hidden    []string
		ReadWrite []string
	}{settings, s.RunAs, s.RunAsRequired, s.Workspace, s.Hidden, s.ReadWrite})
	return p.interp.Path + "\x00" + string(b)
}

// zygoteGrants maps the read-only paths a run needs onto what its zygote is
// granted: a file in the code dir becomes the code dir (every inline
// snippet lives there), anything else stays as is.
func (w *warmPool) zygoteGrants(paths []string) []string {
	code, ws := codeDir(w.e.cfg.StateDir), w.e.cfg.Workspace
	hidden := hiddenTrees(w.e.cfg.StateDir)
	within := func(p, dir string) bool { return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/") }
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if filepath.Dir(p) == code {
			p = code
		} else if within(p, ws) && !slices.ContainsFunc(hidden, func(h string) bool { return within(p, h) }) {
			continue // every zygote may write the workspace already
		}
		out = append(out, p)
	}
	return out
}

// busyWait bounds how long a run waits for one of its key's warm
// interpreters to be free before starting cold, and shortRun is how young a
// run must be for waiting behind it to be worth it. A cold start costs as
// much CPU as ten or more warm runs: under a burst of requests, queueing for
// the warm interpreters (one per CPU) drains faster than starting cold.
const (
	busyWait = time.Second
	shortRun = 250 * time.Millisecond
)

// maxWarmRequest keeps a request within one control message.
const maxWarmRequest = 96 << 10

// maxExtraFiles is how many extra files (fd 3, 4, ...) a warm run can
// inherit (driver.py's _MAX_EXTRA).
const maxExtraFiles = 4

func eligibleVersion(v string) bool {
	return compareVersions(v, "3.8") >= 0
}

// startupVar reports whether the interpreter (or a library it loads at
// startup) reads the variable once at startup, so that a run needing a
// different value cannot reuse an interpreter started with another.
func startupVar(k string) bool {
	switch k {
	case "HOME", "LANG", "LANGUAGE", "GLIBC_TUNABLES", "TZDIR":
		return true
	}
	for _, p := range []string{"PYTHON", "LC_", "LD_", "MALLOC_", "OMP_", "OPENBLAS_", "MKL_"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

func startupEnv(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if startupVar(k) {
			m[k] = v
		}
	}
	return m
}

// sameStartupEnv reports whether env starts Python as the zygote's want
// did. One exception: a PYTHONPATH the zygote was started without, which
// the driver applies to sys.path as startup would (returned for checking).
func sameStartupEnv(want map[string]string, env []string) (ok bool, pythonPath string) {
	n := 0
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if !startupVar(k) {
			continue
		}
		if _, had := want["PYTHONPATH"]; k == "PYTHONPATH" && !had {
			pythonPath = v
			continue
		}
		n++
		if w, ok := want[k]; !ok || w != v {
			return false, ""
		}
	}
	return n == len(want), pythonPath
}

// pythonPathSafe reports whether adding the PYTHONPATH entries to sys.path
// after startup is the same as having them at startup: no entry may hold a
// module the zygote imported at startup (cold, it would have shadowed it) or
// a sitecustomize/usercustomize (site imports those at startup).
func (z *zygote) pythonPathSafe(pythonPath, cwd string, run *sandbox.Spec) bool {
	for _, dir := range filepath.SplitList(pythonPath) {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		if !mayList(run, dir) {
			// The run could not list it: decide nothing from what the
			// server sees there (it names any directory a request likes).
			return false
		}
		fi, err := os.Stat(dir)
		if err != nil {
			continue // nothing there to import at startup
		}
		if !fi.IsDir() {
			return false // a zip archive: not worth listing
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false
		}
		for _, ent := range entries {
			name, _, _ := strings.Cut(ent.Name(), ".")
			if z.modules[name] || name == "sitecustomize" || name == "usercustomize" {
				return false
			}
		}
	}
	return true
}

// mayList reports whether a run confined by spec could list dir: it lies in
// what the run is granted (bound for it when hidden), or its mode bits let
// the run-as user read it.
func mayList(spec *sandbox.Spec, dir string) bool {
	if spec == nil || spec.RunAs == nil {
		return true
	}
	for _, g := range append(append([]string{spec.Workspace, spec.TmpDir}, spec.ReadOnly...), spec.ReadWrite...) {
		if g != "" && workspace.Within(g, filepath.Clean(dir)) {
			return true
		}
	}
	if sandbox.CheckAccess(spec.RunAs, dir, sandbox.AccessRead|sandbox.AccessExec) == nil {
		return true
	}
	// A missing directory holds nothing to import, which the run could
	// see only if it may search the nearest ancestor that exists.
	for p := dir; ; {
		if _, err := os.Lstat(p); err == nil {
			return p != dir && sandbox.CheckAccess(spec.RunAs, p, sandbox.AccessExec) == nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return false
		}
		p = parent
	}
}

// acquire finds a ready zygote for p (an idle one, if it is confined),
// starting one when there is none and the key has room for another. A
// confined zygote it returns is reserved for p until release.
func (w *warmPool) acquire(p *prepared) (*zygote, string) {
	key := warmKey(p)
	var busyUntil time.Time
	for attempt := 0; ; attempt++ {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return nil, "engine closed"
		}
		var pick, starting *zygote
		busy, shortBusy := false, false
		for _, z := range w.zs[key] {
			select {
			case <-z.ready:
			default:
				starting = z
				continue
			}
			if z.err != nil {
				continue // dead; its watcher removes it
			}
			if z.exclusive && z.inflight > 0 {
				busy = true
				shortBusy = shortBusy || time.Since(z.busySince) < w.cfg.shortRun
				continue
			}
			pick = z
			break
		}
		if pick != nil {
			if pick.inflight == 0 {
				pick.busySince = time.Now()
			}
			pick.inflight++
			w.mu.Unlock()
			reason, replaced := w.accepts(pick, p)
			if reason == "" {
				pick.lastUsed.Store(time.Now().UnixNano())
				return pick, ""
			}
			w.release(pick)
			if replaced && w.cfg.wait && attempt < 3 {
				continue // a replacement is starting: wait for it
			}
			return nil, reason
		}
		if starting == nil && len(w.zs[key]) < w.cfg.PerInterpreter {
			if t, ok := w.failedAt[key]; ok && time.Since(t) < retryAfterFailure {
				w.mu.Unlock()
				return nil, "warm interpreter failed"
			}
			starting = w.startLocked(key, p)
		}
		freed := w.freed
		w.mu.Unlock()
		if starting == nil && busy {
			// Every warm interpreter of the key is running a run. When one
			// of those runs is short so far, one is usually free again
			// within milliseconds, far sooner than a cold start would
			// finish (and a cold start would take the CPU the warm runs
			// are using): wait for one, a while. Behind long runs, start
			// cold at once.
			if !shortBusy {
				return nil, "warm interpreters busy with long runs"
			}
			if busyUntil.IsZero() {
				busyUntil = time.Now().Add(w.cfg.busyWait)
			}
			left := time.Until(busyUntil)
			if left <= 0 {
				return nil, "warm interpreters busy"
			}
			if w.cfg.waiting != nil {
				w.cfg.waiting.Add(1)
			}
			t := time.NewTimer(left)
			select {
			case <-freed:
			case <-t.C:
			}
			t.Stop()
			if w.cfg.waiting != nil {
				w.cfg.waiting.Add(-1)
			}
			continue
		}
		switch {
		case starting == nil:
			return nil, "warm interpreter failed"
		case !w.cfg.wait || attempt >= 3:
			return nil, "warm interpreter starting"
		}
		select {
		case <-starting.ready:
		case <-starting.dead:
		}
	}
}

// accepts says why z cannot run p ("" when it can), and whether z was
// replaced for it (stale, or its grants do not cover p): a new zygote is
// then starting.
func (w *warmPool) accepts(z *zygote, p *prepared) (string, bool) {
	ok, pythonPath := sameStartupEnv(z.startupEnv, p.env)
	if !ok && z.sameHome(p.env) {
		ok, pythonPath = sameStartupEnv(z.startupEnv, withHome(p.env, z.startupEnv["HOME"]))
	}
	if !ok {
		return "startup environment differs", false
	}
	if pythonPath != "" && !z.pythonPathSafe(pythonPath, p.dir, p.sandbox) {
		return "PYTHONPATH shadows a startup module", false
	}
	reason := ""
	if p.sandbox != nil && z.spec != nil {
		if ok, _ := sandbox.Covers(z.spec, p.sandbox); !ok {
			reason = "path outside the warm interpreter's grants"
		}
	}
	if reason == "" && z.stale() {
		reason = "site-packages changed"
	}
	if reason == "" {
		return "", false
	}
	// Replace z by a zygote started now, granted what this run needs.
	w.mu.Lock()
	defer w.mu.Unlock()
	w.retireLocked(z)
	if !w.closed {
		w.startLocked(z.key, p)
	}
	return reason, true
}

// background runs f off the request's path; close waits for it.
func (w *warmPool) background(f func()) {
	w.bg.Add(1)
	w.cleanups.Add(1)
	go func() {
		defer w.bg.Done()
		defer w.cleanups.Done()
		f()
	}()
}

// release ends a reservation taken by acquire.
func (w *warmPool) release(z *zygote) {
	w.mu.Lock()
	z.inflight--
	close(w.freed) // wakes runs waiting for a busy key
	w.freed = make(chan struct{})
	w.mu.Unlock()
}

func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}

// sameHome reports whether env differs from the zygote's startup
// environment in HOME only, in a way startup would not notice: neither home
// holds a .local (the user base, whose site-packages startup would add).
// Confined runs get a HOME of their own (their tmp dir) when the server's is
// out of the run-as user's reach.
func (z *zygote) sameHome(env []string) bool {
	if z.homeHasLocal {
		return false
	}
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == "HOME" {
			_, err := os.Lstat(filepath.Join(v, ".local"))
			return errors.Is(err, fs.ErrNotExist)
		}
	}
	return false
}

func withHome(env []string, home string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		if strings.HasPrefix(kv, "HOME=") {
			kv = "HOME=" + home
		}
		out[i] = kv
	}
	return out
}

// startLocked starts a zygote for p's key in the background (w.mu held).
func (w *warmPool) startLocked(key string, p *prepared) *zygote {
	w.driverOnce.Do(func() { w.driverPath, w.driverErr = w.writeDriver() })
	if w.driverErr != nil {
		w.failedAt[key] = time.Now()
		return nil
	}
	// Make room: retire the least recently used.
	for w.countLocked() >= w.cfg.MaxInterpreters {
		var lru *zygote
		for _, l := range w.zs {
			for _, z := range l {
				if lru == nil || z.lastUsed.Load() < lru.lastUsed.Load() {
					lru = z
				}
			}
		}
		w.retireLocked(lru)
	}
	var ro []string
	if p.sandbox != nil {
		w.grants[key] = appendNew(w.grants[key], w.zygoteGrants(p.sandbox.ReadOnly)...)
		ro = slices.Clone(w.grants[key])
	}
	z, err := w.spawn(key, p, ro)
	if err != nil {
		w.failedAt[key] = time.Now()
		return nil
	}
	w.zs[key] = append(w.zs[key], z)
	delete(w.failedAt, key)
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		<-z.dead
		w.mu.Lock()
		w.removeLocked(z)
		if z.err != nil && !z.retired {
			w.failedAt[z.key] = time.Now()
		}
		w.mu.Unlock()
	}()
	return z
}

func (w *warmPool) countLocked() int {
	n := 0
	for _, l := range w.zs {
		n += len(l)
	}
	return n
}

// removeLocked takes z out of the pool's lists.
func (w *warmPool) removeLocked(z *zygote) {
	l := slices.DeleteFunc(w.zs[z.key], func(c *zygote) bool { return c == z })
	if len(l) == 0 {
		delete(w.zs, z.key)
	} else {
		w.zs[z.key] = l
	}
}

// writeDriver stores the embedded driver under the state dir, named by its
// content hash.
func (w *warmPool) writeDriver() (string, error) {
	dir := filepath.Join(w.e.cfg.StateDir, "warm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	sum := sha256.Sum256(driverSource)
	path := filepath.Join(dir, "driver-"+hex.EncodeToString(sum[:8])+".py")
	if data, err := os.ReadFile(path); err == nil && bytes.Equal(data, driverSource) {
		return path, nil
	}
	tmp, err := os.CreateTemp(dir, ".driver-*")
	if err != nil {
		return "", err
	}
	_, werr := tmp.Write(driverSource)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644), os.Rename(tmp.Name(), path)); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, nil
}

func (w *warmPool) retire(z *zygote) {
	w.mu.Lock()
	w.retireLocked(z)
	w.mu.Unlock()
}

// retireLocked takes z out of service. Closing the control socket lets the
// zygote finish the runs it has in flight and exit.
func (w *warmPool) retireLocked(z *zygote) {
	z.retired = true
	w.removeLocked(z)
	z.conn.Close()
}

func (w *warmPool) janitor() {
	defer w.bg.Done()
	t := time.NewTicker(min(w.cfg.IdleTimeout/2, time.Minute))
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
			cutoff := time.Now().Add(-w.cfg.IdleTimeout).UnixNano()
			w.mu.Lock()
			for _, l := range w.zs {
				for _, z := range slices.Clone(l) {
					if z.lastUsed.Load() < cutoff && z.inflight == 0 {
						w.retireLocked(z)
					}
				}
			}
			w.mu.Unlock()
		}
	}
}

func (w *warmPool) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.quit)
	var zs []*zygote
	for _, l := range w.zs {
		zs = append(zs, l...)
	}
	w.mu.Unlock()
	for _, z := range zs {
		z.conn.Close()
		z.proc.Terminate()
	}
	w.bg.Wait() // includes every zygote's exit
}

// zygote is one running fork server.
type zygote struct {
	key        string
	conn       *net.UnixConn // our end of the control socket
	proc       *launcher.Process
	startupEnv map[string]string
	tmpDir     string

	ready     chan struct{} // closed when READY or FAIL arrived (or it died first)
	readyOnce sync.Once
	err       error           // why it failed, set before ready is closed
	dead      chan struct{}   // closed when its whole tree is gone
	paths     []pathStamp     // its sys.path directories, to notice installs
	binds     []bindStamp     // directories its mount namespace holds, to notice replacements
	modules   map[string]bool // top-level modules imported at its startup
	log       *capture        // its own stdout/stderr (driver errors)

	// spec is what the zygote is confined with (nil: no sandbox), report
	// what the launcher applied; its forks inherit both.
	spec    *sandbox.Spec
	report  sandbox.Report
	started chan struct{} // closed once report is set
	// exclusive: one run at a time (a confined zygote's runs share its
	// private /dev/shm and namespaces).
	exclusive    bool
	homeHasLocal bool // its HOME has a .local (user site): runs must share HOME

	inflight  int       // runs reserved or running (warmPool.mu)
	busySince time.Time // when inflight last went from 0 to 1 (warmPool.mu)
	retired   bool      // taken out of service on purpose (warmPool.mu)

	lastUsed atomic.Int64
	pid      atomic.Int64 // the zygote's python
}

type pathStamp struct {
	path    string
	modTime time.Time
}

// spawn starts a zygote for p's interpreter, confined like p's sandbox with
// the read-only grants ro (and write grants for every run's tmp dir).
func (w *warmPool) spawn(key string, p *prepared, ro []string) (*zygote, error) {
	e, interp := w.e, p.interp
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "warm-ctl"), os.NewFile(uintptr(fds[1]), "warm-ctl-child")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	conn := fc.(*net.UnixConn)
	logR, logW, err := os.Pipe()
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer logW.Close()
	// Its own TMPDIR, beside the driver rather than among the runs' ones.
	tmpDir, err := os.MkdirTemp(filepath.Join(e.cfg.StateDir, "warm"), "tmp-")
	if err != nil {
		conn.Close()
		logR.Close()
		return nil, err
	}
	env := e.baseEnv(interp, StrategySystem, tmpDir)
	var zbox *sandbox.Spec
	if b := p.sandbox; b != nil {
		// The runs' settings and identity; grants for every run it forks.
		zbox = &sandbox.Spec{
			Settings:  b.Settings,
			RunID:     fmt.Sprintf("%s-%08x", filepath.Base(tmpDir), crc32.ChecksumIEEE([]byte(tmpDir))),
			Workspace: b.Workspace, TmpDir: tmpDir,
			// /proc: S walks the run's tree there (strict grants runs only a
			// few files of it).
			ReadOnly:  append(slices.Clone(ro), w.driverPath, "/proc"),
			ReadWrite: append(slices.Clone(b.ReadWrite), tmpRoot(e.cfg.StateDir)),
			Hidden:    b.Hidden, RunAs: b.RunAs, RunAsRequired: b.RunAsRequired,
		}
		zbox.Limits = zbox.Limits.WithDefaults()
		zbox.Limits.CPUSeconds = -1 // each run sets its own; the zygote's CPU time must not count
		if home, ok := env.get("HOME"); ok && b.RunAs != nil && sandbox.CheckAccess(b.RunAs, home, sandbox.AccessRead|sandbox.AccessExec) != nil {
			env.set("HOME", tmpDir) // as sandboxFor does for runs
		}
	}
	envList := env.list()
	z := &zygote{
		key: key, conn: conn, startupEnv: startupEnv(envList), tmpDir: tmpDir,
		ready: make(chan struct{}), dead: make(chan struct{}), log: newCapture(8 << 10),
		spec: zbox, started: make(chan struct{}), exclusive: zbox != nil && zbox.Policy != sandbox.PolicyNone,
	}
	if home, ok := env.get("HOME"); ok {
		_, err := os.Lstat(filepath.Join(home, ".local"))
		z.homeHasLocal = !errors.Is(err, fs.ErrNotExist)
	}
	if zbox != nil {
		for _, d := range append(append([]string{zbox.Workspace}, zbox.ReadOnly...), zbox.ReadWrite...) {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				z.binds = append(z.binds, bindStamp{d, inodeOf(d)})
			}
		}
	}
	z.lastUsed.Store(time.Now().UnixNano())
	argv := []string{interp.Path, "-u", w.driverPath, strconv.Itoa(w.cfg.Spares), strings.Join(w.cfg.Preload, ",")}
	var startedOnce sync.Once
	proc, err := launcher.Start(launcher.Spec{Argv: argv, Env: envList, Dir: e.cfg.Workspace, Grace: e.cfg.KillGrace, Sandbox: zbox},
		launcher.Options{Executable: e.cfg.Launcher, Stdin: theirs, Stdout: logW, Stderr: logW,
			OnStart: func(pid int) { z.pid.Store(int64(pid)) },
			OnStarted: func(ev launcher.Event) {
				startedOnce.Do(func() {
					if ev.Sandbox != nil {
						z.report = *ev.Sandbox
					}
					close(z.started)
				})
			}})
	if err != nil {
		conn.Close()
		logR.Close()
		os.RemoveAll(tmpDir)
		return nil, err
	}
	z.proc = proc
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		_, _ = io.Copy(z.log, logR)
		logR.Close()
	}()
	go z.awaitReady()
	go func() {
		ev, err := proc.Wait()
		<-logDone
		if err == nil && ev.ExitCode != 0 {
			err = fmt.Errorf("warm interpreter exited with status %d", ev.ExitCode)
		}
		z.fail(err)
		conn.Close()
		os.RemoveAll(tmpDir)
		close(z.dead)
	}()
	return z, nil
}

var errZygoteGone = errors.New("warm interpreter exited before it was ready")

// fail records why the zygote cannot serve, if it never became ready.
func (z *zygote) fail(err error) {
	z.readyOnce.Do(func() {
		if err == nil {
			err = errZygoteGone
		}
		if out, _ := z.log.Text(); out != "" {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(out))
		}
		z.err = err
		close(z.ready)
	})
}

// awaitReady reads the zygote's one message: READY and its sys.path, or
// FAIL and why.
func (z *zygote) awaitReady() {
	buf := make([]byte, 64<<10)
	n, _, _, _, err := z.conn.ReadMsgUnix(buf, nil)
	if err != nil || n == 0 {
		return // it died; the exit path reports why
	}
	fields := strings.Split(string(buf[:n]), "\x00")
	switch fields[0] {
	case "READY":
		// The launcher's "started" event (what confines the zygote) was
		// written before Python ran; its reader may still be behind.
		select {
		case <-z.started:
		case <-z.dead:
			return
		}
		if z.report.RunAsDropped {
			z.fail(errors.New("warm interpreter could not run as the run-as user: " + strings.Join(z.report.Skipped, "; ")))
			z.proc.Terminate()
			return
		}
		n, _ := strconv.Atoi(fields[1])
		n = min(n, len(fields)-2)
		for _, p := range fields[2 : 2+n] {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				z.paths = append(z.paths, pathStamp{p, fi.ModTime()})
			}
		}
		z.modules = map[string]bool{}
		for _, m := range fields[2+n:] {
			z.modules[m] = true
		}
		z.readyOnce.Do(func() { close(z.ready) })
	case "FAIL":
		z.fail(errors.New(strings.Join(fields[1:], " ")))
		z.proc.Terminate()
	}
}

// stale reports whether a directory on the zygote's sys.path changed since
// it started (a package was installed or removed: its imports and .pth
// processing could differ from a fresh start's), or a directory its mount
// namespace holds (the workspace, the code dir...) was replaced: the
// namespace still shows the old one.
func (z *zygote) stale() bool {
	for _, s := range z.paths {
		fi, err := os.Stat(s.path)
		if err != nil || !fi.ModTime().Equal(s.modTime) {
			return true
		}
	}
	for _, b := range z.binds {
		if inodeOf(b.path) != b.inode {
			return true
		}
	}
	return false
}

type bindStamp struct {
	path  string
	inode [2]uint64 // device and inode number
}

func inodeOf(path string) [2]uint64 {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return [2]uint64{}
	}
	return [2]uint64{st.Dev, st.Ino}
}

// warmHooks connect a warm run to its pool.
type warmHooks struct {
	release func()       // frees the zygote once the run is over
	cleanup func(func()) // runs the cgroup's removal off the run's path
	lost    func()       // the run turned out never to have started
}

// start hands p to one of the zygote's spare runs, with box (the run's
// cgroup and Landlock layer; nil without a sandbox).
func (z *zygote) start(p *prepared, opts launcher.Options, grace time.Duration, box *sandbox.WarmRun, hooks warmHooks) (*warmRun, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer statusW.Close()
	stdin := opts.Stdin
	if stdin == nil {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			statusR.Close()
			return nil, err
		}
		defer devnull.Close()
		stdin = devnull
	}
	// Fd puts the files in blocking mode, which is what the run expects.
	fds := []int{int(stdin.Fd()), int(opts.Stdout.Fd()), int(opts.Stderr.Fd()), int(statusW.Fd())}
	conf := boxFields{wipe: z.exclusive && z.report.PrivateShm, serial: z.exclusive}
	if box != nil {
		for _, f := range box.CgroupFiles() {
			fds = append(fds, int(f.Fd()))
			conf.cgroups++
		}
		if f, flags := box.Ruleset(); f != nil {
			fds = append(fds, int(f.Fd()))
			conf.ruleset, conf.flags = true, flags
		}
		conf.cpu = box.CPUSeconds()
	}
	for _, f := range opts.ExtraFiles {
		fds = append(fds, int(f.Fd()))
	}
	rights := unix.UnixRights(fds...)
	_, _, err = z.conn.WriteMsgUnix(encodeRequest(p, grace, conf), rights, nil)
	if box != nil {
		box.ReleaseFiles() // the message holds its own references
	}
	if err != nil {
		statusR.Close()
		return nil, err
	}
	statusW.Close()

	// The run goes on without waiting for G's "started": that round trip
	// (a wakeup of this process, half a millisecond on an idle VM CPU)
	// overlaps with the run. readStatus takes it when it comes.
	r := &warmRun{done: make(chan struct{}), grace: grace, pidfd: -1, box: box, hooks: hooks}
	go r.readStatus(statusR, opts.OnStart)
	return r, nil
}

// errWarmLost says a warm run never started: nobody took the request (the
// zygote died with it queued), or the fork could not confine itself or see
// the run's file. Nothing of the run ran, so it can start cold.
var errWarmLost = errors.New("warm interpreter did not start the run")

// boxFields is the RUN message's confinement field (see driver.py).
type boxFields struct {
	cgroups int    // cgroup files passed
	ruleset bool   // a Landlock ruleset passed (after them)
	flags   uint32 // landlock_restrict_self flags
	cpu     int64  // RLIMIT_CPU, 0 for none
	wipe    bool   // empty /dev/shm after the run
	serial  bool   // the zygote serves one run at a time: S stays for the next
}

func (b boxFields) String() string {
	return fmt.Sprintf("%d,%d,%d,%d,%d,%d", b.cgroups, b2i(b.ruleset), b.flags, b.cpu, b2i(b.wipe), b2i(b.serial))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// encodeRequest is the RUN message (see driver.py).
func encodeRequest(p *prepared, grace time.Duration, box boxFields) []byte {
	fields := []string{"RUN", p.dir, p.argv[2], strconv.FormatInt(grace.Milliseconds(), 10), box.String()}
	args := p.argv[3:]
	fields = append(fields, strconv.Itoa(len(args)))
	fields = append(fields, args...)
	fields = append(fields, strconv.Itoa(len(p.env)))
	fields = append(fields, p.env...)
	return []byte(strings.Join(fields, "\x00"))
}

type warmEvent struct {
	launcher.Event
	Supervisor int `json:"supervisor,omitempty"`
}

// warmRun is a run on a warm interpreter, seen from the server; it behaves
// as a launcher.Process.
type warmRun struct {
	spid  int // the supervisor: process group leader of the run
	grace time.Duration

	mu    sync.Mutex
	pidfd int // of the supervisor, -1 once the run is over

	done     chan struct{}
	final    launcher.Event
	gotFinal bool
	startErr *launcher.Event
	killed   atomic.Bool

	termOnce sync.Once

	notStarted  bool // G never took or never started the run (errWarmLost)
	termPending bool // Terminate came before "started"

	box       *sandbox.WarmRun // the run's cgroup and Landlock layer, or nil
	boxReport *sandbox.Report  // what box.Finish reported
	hooks     warmHooks
}

func (r *warmRun) readStatus(f *os.File, onStart func(int)) {
	defer close(r.done)
	defer r.finish()
	defer f.Close()
	br := bufio.NewReader(f)
	var first warmEvent
	line, err := br.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &first) != nil || first.Kind != launcher.EventStarted {
		r.mu.Lock()
		r.notStarted = true
		r.mu.Unlock()
		if r.hooks.lost != nil {
			r.hooks.lost()
		}
		return
	}
	r.mu.Lock()
	r.spid = first.Supervisor
	if fd, err := unix.PidfdOpen(r.spid, 0); err == nil {
		r.pidfd = fd
	}
	term := r.termPending
	r.mu.Unlock()
	if onStart != nil {
		onStart(first.PID)
	}
	if term {
		r.Terminate()
	}
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var ev warmEvent
			if json.Unmarshal(line, &ev) == nil {
				switch ev.Kind {
				case launcher.EventError:
					e := ev.Event
					r.startErr = &e
				case launcher.EventExit:
					// The supervisor's last word, written once every
					// process of the run is reaped: the run is over (no
					// need to wait for the supervisor's own exit).
					r.final, r.gotFinal = ev.Event, true
				}
			}
		}
		if err != nil || r.gotFinal {
			break
		}
	}
	r.mu.Lock()
	if r.pidfd >= 0 {
		unix.Close(r.pidfd)
		r.pidfd = -1
	}
	r.mu.Unlock()
}

// finish cleans up the run's confinement (sweeping and removing its cgroup,
// reading its evidence) and frees the zygote, before the run counts as done.
func (r *warmRun) finish() {
	if r.box != nil {
		ev := r.final
		if !r.gotFinal {
			ev = launcher.Event{ExitCode: -1, Signal: int(syscall.SIGKILL)}
		}
		rep := r.box.Finish(ev.ExitCode, ev.Signal, ev.UserSeconds+ev.SystemSeconds)
		r.boxReport = &rep
		// Every process of the run is reaped (S reported, or the backstop
		// killed S's group and Close sweeps the cgroup): removing the
		// cgroup can wait until the result is out.
		box := r.box
		if r.hooks.cleanup != nil {
			r.hooks.cleanup(func() { _ = box.Close() })
		} else {
			_ = box.Close()
		}
	}
	if r.hooks.release != nil {
		r.hooks.release()
	}
}

// Terminate asks the supervisor to end the run: SIGTERM to the whole tree,
// SIGKILL after the grace period; its process group is killed as a backstop.
func (r *warmRun) Terminate() {
	r.mu.Lock()
	if r.spid == 0 {
		r.termPending = true // readStatus terminates it once it has started
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.termOnce.Do(func() {
		select {
		case <-r.done:
			return
		default:
		}
		r.mu.Lock()
		if r.pidfd >= 0 {
			_ = unix.PidfdSendSignal(r.pidfd, unix.SIGTERM, nil, 0)
		} else if r.spid > 0 {
			_ = unix.Kill(r.spid, unix.SIGTERM)
		}
		r.mu.Unlock()
		go func() {
			select {
			case <-r.done:
			case <-time.After(r.grace + 2*time.Second):
				r.killed.Store(true)
				_ = syscall.Kill(-r.spid, syscall.SIGKILL)
			}
		}()
	})
}

func (r *warmRun) Done() <-chan struct{} { return r.done }

func (r *warmRun) Wait() (launcher.Event, error) {
	<-r.done
	if r.notStarted {
		return launcher.Event{}, errWarmLost
	}
	if r.startErr != nil {
		return *r.startErr, errors.New(r.startErr.Error)
	}
	if r.gotFinal {
		ev := r.final
		ev.Sandbox = r.boxReport
		return ev, nil
	}
	// The supervisor died without reporting (killed by the backstop).
	ev := launcher.Event{Kind: launcher.EventExit, ExitCode: -1, Sandbox: r.boxReport}
	if r.killed.Load() {
		ev.Signal = int(syscall.SIGKILL)
		ev.ExitCode = -ev.Signal
	}
	return ev, nil
}

//go:build linux

package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	_ "embed"

	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/sandbox"
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
// run's status socket and hands it to S, which sleeps in wait4 through
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
// at a time, because its runs share its /dev/shm and its IPC, PID and
// network namespaces: the run stacks a seccomp layer under which it cannot
// name the zygote's own processes (driver.py), S empties /dev/shm and the
// IPC namespace after each run before it forks the next run's process, and
// reports "clean" (or "dirty": the zygote stops, and is retired; see
// warmrun.go), and concurrent runs get zygotes of their own, up to
// PerInterpreter per key.
//
// Zygotes are keyed by interpreter and sandbox (settings, identity,
// workspace, hidden trees), retired when idle, when a directory on their
// sys.path changes, when a run needs a path outside their grants (the
// replacement's grants include it), or LRU beyond MaxInterpreters; a retired
// zygote lets its runs in flight finish.

//go:embed driver.py
var driverSource []byte

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
	earlyExits         atomic.Uint64 // warm runs reported over as their process began to exit (tests)
	reasonsMu          sync.Mutex
	reasons            map[string]uint64
	retiredBroken      map[string]uint64 // zygotes retired because they could not serve on, by why

	auto map[string]*adaptive // adaptive preload, per key (adaptive.go; mu)
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
	if cfg.Auto != nil {
		a := cfg.Auto.withDefaults()
		cfg.Auto = &a
	}
	w := &warmPool{e: e, cfg: cfg, zs: map[string][]*zygote{}, freed: make(chan struct{}), grants: map[string][]string{}, failedAt: map[string]time.Time{},
		quit: make(chan struct{}), reasons: map[string]uint64{}, retiredBroken: map[string]uint64{}}
	// Spare cgroups carry a checksum of the runs' temp root, as run ids
	// carry one of their temp dir (sandbox.go): unique among the servers
	// sharing a parent cgroup.
	w.confine.SpareTag = fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(tmpRoot(e.cfg.StateDir))))
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
	s.Preload = w.preloadStats()
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
		if box, err = w.confine.Prepare(*p.sandbox, z.report, int(z.pid.Load()), p.dedicated); err != nil {
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
		broken: func(why string) {
			w.broken(z, why)
		},
		imports: func(mods []string) { w.learn(z, p, mods) },
		exited: func(early bool) {
			if early {
				w.earlyExits.Add(1)
			}
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
	if p.dedicated {
		w.dedicate(z, p)
	}
	return r
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
		if busy && (shortBusy || starting == nil) {
			// Every warm interpreter of the key is running a run. When one
			// of those runs is short so far, one is usually free again
			// within milliseconds, far sooner than a cold start would
			// finish (and a cold start would take the CPU the warm runs
			// are using): wait for one, or for the one starting, a while.
			// Behind long runs, start cold at once.
			if !shortBusy {
				return nil, "warm interpreters busy with long runs"
			}
			var ready, dead <-chan struct{}
			if starting != nil {
				ready, dead = starting.ready, starting.dead
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
			case <-ready:
			case <-dead:
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
	return w.addLocked(key, p)
}

// addLocked starts one more zygote for p's key, beside the ones it has
// (w.mu held): startLocked after making room, or an adaptive preload
// replacement, which the key's older zygotes serve beside until it is
// ready.
func (w *warmPool) addLocked(key string, p *prepared) *zygote {
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
	if p.sandbox != nil {
		// Its first run's cgroup, made off the lock (close waits for it).
		w.bg.Add(1)
		go func(lim sandbox.Limits) {
			defer w.bg.Done()
			w.confine.Ahead(lim)
		}(p.sandbox.Limits)
	}
	w.zs[key] = append(w.zs[key], z)
	delete(w.failedAt, key)
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		<-z.dead
		w.mu.Lock()
		w.removeLocked(z)
		if z.err != nil && !z.retired && !z.replacement {
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

// broken retires z, which cannot serve another run (why), and counts it.
func (w *warmPool) broken(z *zygote, why string) {
	w.reasonsMu.Lock()
	w.retiredBroken[why]++
	w.reasonsMu.Unlock()
	w.retire(z)
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
	_ = w.confine.Close()
}

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
	"io"
	"net"
	"os"
	"path/filepath"
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
// the zygote forks the next spare pair while the run goes on.
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
// NUL, at most maxExtraFiles extra files, and a sandbox the zygote can
// provide (warmSandboxIneligible: for now policy none without cgroup
// limits). Everything else runs cold, and so does a request that finds no
// ready zygote (one is started in the background for next time). Zygotes
// are keyed by interpreter and sandbox settings, retired when idle, when a
// directory on their sys.path changes, or LRU beyond MaxInterpreters; a
// retired zygote lets its runs in flight finish.

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
	// MaxInterpreters bounds how many warm interpreters (one per
	// interpreter path) are kept; the least recently used is retired.
	// Default 4.
	MaxInterpreters int
	// IdleTimeout retires a warm interpreter unused for this long.
	// Default 10 minutes.
	IdleTimeout time.Duration

	// wait makes a run wait for its warm interpreter to be ready instead of
	// running cold meanwhile (tests use it to exercise the warm path).
	wait bool
	// off keeps warm interpreters off even when tests force them on.
	off bool
}

// WarmStats counts how runs were started.
type WarmStats struct {
	Warm        uint64            `json:"warm"`
	Cold        uint64            `json:"cold"`
	ColdReasons map[string]uint64 `json:"cold_reasons,omitempty"`
	Zygotes     int               `json:"zygotes"`
}

// runProcess is a started run: a launcher, or a warm supervisor.
type runProcess interface {
	Done() <-chan struct{}
	Terminate()
	Wait() (launcher.Event, error)
}

// startProcess starts p warm when it can, cold otherwise.
func (e *Engine) startProcess(p *prepared, opts launcher.Options) (runProcess, error) {
	spec := launcher.Spec{Argv: p.argv, Env: p.env, Dir: p.dir, Grace: e.cfg.KillGrace, ExtraFiles: len(p.extraFiles), Sandbox: p.sandbox}
	if e.warm != nil {
		if r := e.warm.start(p, opts); r != nil {
			return r, nil
		}
	}
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

// WarmStats reports how runs were started so far.
func (e *Engine) WarmStats() WarmStats {
	if e.warm == nil {
		return WarmStats{}
	}
	return e.warm.statsSnapshot()
}

// warmPool holds the zygotes, one per interpreter path.
type warmPool struct {
	e   *Engine
	cfg WarmConfig

	mu       sync.Mutex
	zs       map[string]*zygote
	failedAt map[string]time.Time
	closed   bool
	bg       sync.WaitGroup
	quit     chan struct{}

	// nulFree remembers inline code files (named by their content hash,
	// so immutable) already checked for NUL bytes.
	nulFree map[string]struct{}

	driverOnce sync.Once
	driverPath string
	driverErr  error

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

// warmableSandbox are the sandbox settings warm runs support so far.
var warmableSandbox = sandbox.Settings{Policy: sandbox.PolicyNone, Limits: sandbox.Limits{MemoryBytes: -1, MaxProcs: -1}}

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
	if cfg.MaxInterpreters <= 0 {
		cfg.MaxInterpreters = 4
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	w := &warmPool{e: e, cfg: cfg, zs: map[string]*zygote{}, failedAt: map[string]time.Time{}, nulFree: map[string]struct{}{},
		quit: make(chan struct{}), reasons: map[string]uint64{}}
	w.bg.Add(1)
	go w.janitor()
	// Warm the default interpreter right away: the first request should
	// already find it ready.
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		interp, err := e.defaultInterpreter(context.Background())
		if err != nil || !eligibleVersion(interp.Version) {
			return
		}
		settings, err := e.sandboxSettings(&Request{})
		if err != nil {
			return
		}
		box := &sandbox.Spec{Settings: settings}
		if warmSandboxIneligible(box) != "" {
			return // the server's default runs cannot run warm
		}
		key := warmKey(&prepared{interp: interp, sandbox: box})
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.closed && w.zs[key] == nil {
			w.startLocked(key, interp, box)
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
	s.Zygotes = len(w.zs)
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
	r, err := z.start(p, opts, w.e.cfg.KillGrace)
	if r != nil && p.sandbox != nil {
		r.limits = p.sandbox.Limits.WithDefaults()
		r.boxed = true
	}
	if err != nil {
		// The zygote is gone (or going): retire it and run cold; a new one
		// starts with the next request.
		w.retire(z)
		return w.cold("warm interpreter lost")
	}
	w.warmRuns.Add(1)
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
	if reason := warmSandboxIneligible(p.sandbox); reason != "" {
		return reason
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
	if w.sourceHasNUL(p.argv[2]) {
		// How the file tokenizer treats NUL bytes changed within 3.11.x
		// (older ones stop the line there, newer ones raise SyntaxError);
		// compile() in the driver cannot reproduce both.
		return "NUL in source"
	}
	return ""
}

func (w *warmPool) sourceHasNUL(path string) bool {
	w.mu.Lock()
	_, ok := w.nulFree[path]
	w.mu.Unlock()
	if ok {
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false // the run will report it
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return true
	}
	if filepath.Dir(path) == codeDir(w.e.cfg.StateDir) {
		w.mu.Lock()
		if len(w.nulFree) >= 4096 {
			clear(w.nulFree)
		}
		w.nulFree[path] = struct{}{}
		w.mu.Unlock()
	}
	return false
}

// warmSandboxIneligible says why a run confined by s cannot run warm. The
// zygote is started through the launcher with the run's sandbox settings,
// so what applies per process and is the same for every run (rlimits) it
// passes on to its forks. What the launcher sets up per run (a cgroup for
// memory and process caps, a Landlock ruleset naming the run's tmp dir and
// code file, run-as, namespaces) the warm path does not do yet: such runs
// start cold.
func warmSandboxIneligible(s *sandbox.Spec) string {
	if s == nil {
		return ""
	}
	lim := s.Limits.WithDefaults()
	switch {
	case s.Policy != sandbox.PolicyNone:
		return "sandbox " + string(s.Policy)
	case s.EffectiveNetwork() != sandbox.NetworkAllow:
		return "network deny"
	case s.RunAs != nil:
		return "run-as"
	case lim.MemoryBytes > 0 || lim.MaxProcs > 0:
		return "memory/process limits (per-run cgroup)"
	}
	return ""
}

// WarmIneligible says why runs under the given server sandbox settings
// (and no tighter request) start cold even with warm interpreters on; ""
// when they can run warm.
func WarmIneligible(s sandbox.Settings) string {
	s.Limits = s.Limits.WithDefaults()
	return warmSandboxIneligible(&sandbox.Spec{Settings: s})
}

// warmKey names the zygote a run needs: its interpreter and the sandbox
// settings the zygote is confined with.
func warmKey(p *prepared) string {
	if p.sandbox == nil {
		return p.interp.Path
	}
	b, _ := json.Marshal(p.sandbox.Settings)
	return p.interp.Path + "\x00" + string(b)
}

// warmLimit is the sandbox's classify for what a zygote's runs can hit
// (rlimits only: there is no per-run cgroup on the warm path).
func warmLimit(ev launcher.Event, lim sandbox.Limits) string {
	switch {
	case ev.Signal == int(syscall.SIGXCPU):
		return sandbox.LimitCPU
	case ev.Signal == int(syscall.SIGKILL) && lim.CPUSeconds > 0 && ev.UserSeconds+ev.SystemSeconds >= float64(lim.CPUSeconds):
		return sandbox.LimitCPU
	case ev.Signal == int(syscall.SIGXFSZ):
		return sandbox.LimitFileSize
	}
	return ""
}

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
func (z *zygote) pythonPathSafe(pythonPath, cwd string) bool {
	for _, dir := range filepath.SplitList(pythonPath) {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
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

// acquire finds the ready zygote for p's interpreter, starting one when
// there is none.
func (w *warmPool) acquire(p *prepared) (*zygote, string) {
	key := warmKey(p)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, "engine closed"
	}
	z := w.zs[key]
	if z == nil {
		if t, ok := w.failedAt[key]; ok && time.Since(t) < retryAfterFailure {
			w.mu.Unlock()
			return nil, "warm interpreter failed"
		}
		z = w.startLocked(key, p.interp, p.sandbox)
	}
	w.mu.Unlock()
	if z == nil {
		return nil, "warm interpreter failed"
	}

	if w.cfg.wait {
		select {
		case <-z.ready:
		case <-z.dead:
		}
	}
	select {
	case <-z.ready:
	default:
		return nil, "warm interpreter starting"
	}
	if z.err != nil {
		return nil, "warm interpreter failed"
	}
	ok, pythonPath := sameStartupEnv(z.startupEnv, p.env)
	if !ok {
		return nil, "startup environment differs"
	}
	if pythonPath != "" && !z.pythonPathSafe(pythonPath, p.dir) {
		return nil, "PYTHONPATH shadows a startup module"
	}
	if z.stale() {
		w.retire(z)
		if w.cfg.wait {
			return w.acquire(p)
		}
		return nil, "site-packages changed"
	}
	z.lastUsed.Store(time.Now().UnixNano())
	return z, ""
}

// startLocked starts a zygote for interp in the background (w.mu held).
func (w *warmPool) startLocked(key string, interp Interpreter, box *sandbox.Spec) *zygote {
	w.driverOnce.Do(func() { w.driverPath, w.driverErr = w.writeDriver() })
	if w.driverErr != nil {
		w.failedAt[key] = time.Now()
		return nil
	}
	// Make room: retire the least recently used.
	for len(w.zs) >= w.cfg.MaxInterpreters {
		var lru *zygote
		for _, z := range w.zs {
			if lru == nil || z.lastUsed.Load() < lru.lastUsed.Load() {
				lru = z
			}
		}
		w.retireLocked(lru)
	}
	z, err := w.spawn(key, interp, box)
	if err != nil {
		w.failedAt[key] = time.Now()
		return nil
	}
	w.zs[key] = z
	delete(w.failedAt, key)
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		<-z.dead
		w.mu.Lock()
		if w.zs[z.key] == z {
			delete(w.zs, z.key)
			if z.err != nil {
				w.failedAt[z.key] = time.Now()
			}
		}
		w.mu.Unlock()
	}()
	return z
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
	if w.zs[z.key] == z {
		delete(w.zs, z.key)
	}
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
			for _, z := range w.zs {
				if z.lastUsed.Load() < cutoff {
					w.retireLocked(z)
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
	zs := make([]*zygote, 0, len(w.zs))
	for _, z := range w.zs {
		zs = append(zs, z)
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
	modules   map[string]bool // top-level modules imported at its startup
	log       *capture        // its own stdout/stderr (driver errors)

	lastUsed atomic.Int64
	pid      atomic.Int64 // the zygote's python
}

type pathStamp struct {
	path    string
	modTime time.Time
}

func (w *warmPool) spawn(key string, interp Interpreter, box *sandbox.Spec) (*zygote, error) {
	e := w.e
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
	env := e.baseEnv(interp, StrategySystem, tmpDir).list()
	z := &zygote{
		key: key, conn: conn, startupEnv: startupEnv(env), tmpDir: tmpDir,
		ready: make(chan struct{}), dead: make(chan struct{}), log: newCapture(8 << 10),
	}
	z.lastUsed.Store(time.Now().UnixNano())
	argv := []string{interp.Path, "-u", w.driverPath, strconv.Itoa(w.cfg.Spares), strings.Join(w.cfg.Preload, ",")}
	var zbox *sandbox.Spec
	if box != nil {
		// The run's settings (so its rlimits), as a run of its own.
		zbox = &sandbox.Spec{Settings: box.Settings, RunID: filepath.Base(tmpDir), Workspace: e.cfg.Workspace, TmpDir: tmpDir}
	}
	proc, err := launcher.Start(launcher.Spec{Argv: argv, Env: env, Dir: e.cfg.Workspace, Grace: e.cfg.KillGrace, Sandbox: zbox},
		launcher.Options{Executable: e.cfg.Launcher, Stdin: theirs, Stdout: logW, Stderr: logW,
			OnStart: func(pid int) { z.pid.Store(int64(pid)) }})
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
// it started (a package was installed or removed): its imports and .pth
// processing could differ from a fresh start's.
func (z *zygote) stale() bool {
	for _, s := range z.paths {
		fi, err := os.Stat(s.path)
		if err != nil || !fi.ModTime().Equal(s.modTime) {
			return true
		}
	}
	return false
}

// start hands p to one of the zygote's spare runs.
func (z *zygote) start(p *prepared, opts launcher.Options, grace time.Duration) (*warmRun, error) {
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
	for _, f := range opts.ExtraFiles {
		fds = append(fds, int(f.Fd()))
	}
	rights := unix.UnixRights(fds...)
	_, _, err = z.conn.WriteMsgUnix(encodeRequest(p, grace), rights, nil)
	if err != nil {
		statusR.Close()
		return nil, err
	}
	statusW.Close()

	r := &warmRun{done: make(chan struct{}), grace: grace, pidfd: -1}
	br := bufio.NewReader(statusR)
	var first warmEvent
	line, err := br.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &first) != nil || first.Kind != launcher.EventStarted {
		// Nobody took it (the zygote died with the request queued): the
		// message and its files are gone, and nothing ran.
		statusR.Close()
		return nil, fmt.Errorf("warm interpreter did not start the run")
	}
	r.spid = first.Supervisor
	if fd, err := unix.PidfdOpen(r.spid, 0); err == nil {
		r.pidfd = fd
	}
	if opts.OnStart != nil {
		opts.OnStart(first.PID)
	}
	go r.readStatus(statusR, br)
	return r, nil
}

// encodeRequest is the RUN message (see driver.py).
func encodeRequest(p *prepared, grace time.Duration) []byte {
	fields := []string{"RUN", p.dir, p.argv[2], strconv.FormatInt(grace.Milliseconds(), 10)}
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

	boxed  bool           // the run has a sandbox spec: report like the launcher
	limits sandbox.Limits // its effective limits
}

func (r *warmRun) readStatus(f *os.File, br *bufio.Reader) {
	defer close(r.done)
	defer f.Close()
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

// Terminate asks the supervisor to end the run: SIGTERM to the whole tree,
// SIGKILL after the grace period; its process group is killed as a backstop.
func (r *warmRun) Terminate() {
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
	if r.startErr != nil {
		return *r.startErr, errors.New(r.startErr.Error)
	}
	if r.gotFinal {
		ev := r.final
		if r.boxed {
			ev.Sandbox = &sandbox.Report{LimitExceeded: warmLimit(ev, r.limits)}
		}
		return ev, nil
	}
	// The supervisor died without reporting (killed by the backstop).
	ev := launcher.Event{Kind: launcher.EventExit, ExitCode: -1}
	if r.killed.Load() {
		ev.Signal = int(syscall.SIGKILL)
		ev.ExitCode = -ev.Signal
	}
	return ev, nil
}

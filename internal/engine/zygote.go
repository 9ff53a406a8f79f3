//go:build linux

package engine

// The lifecycle of one fork server: spawned through the launcher under its
// zygote spec, ready once the driver reports its sys.path, stale when what
// it imported or what its mount namespace holds changed.

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/sandbox"
)

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
	// Adaptive preload (adaptive.go): the modules it imports on top of the
	// operator's, the generation of that list, the ones the previous
	// generation had, and what it measured (import ms, resident bytes).
	auto, prevAuto []string
	gen            int
	replacement    bool // started by adaptive preload: its failure excludes a module, not the key
	costs          map[string]float64
	rss            int64
	log            *capture // its own stdout/stderr (driver errors)

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
			Hidden:    b.Hidden, RunAs: b.RunAs, ForkServer: true, NoPrivateProc: b.NoPrivateProc,
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
	spares := w.cfg.Spares
	if z.exclusive {
		// One run at a time, with its supervisor forking the next: a spare
		// waiting beside a run would be a process of the fork server's
		// uid that the run could name (see driver.py).
		spares = 1
	}
	argv := []string{interp.Path, "-u", w.driverPath, strconv.Itoa(spares), w.preloadArgLocked(key, interp.Path, z)}
	if z.exclusive {
		argv = append(argv, "serial")
	}
	var startedOnce sync.Once
	// Its cwd is /: it runs as an identity of its own, which may not reach
	// the workspace (each run changes into its own cwd).
	proc, err := e.launchers.Start(launcher.Spec{Argv: argv, Env: envList, Dir: "/", Grace: e.cfg.KillGrace, Sandbox: zbox},
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
		n, _ := strconv.Atoi(fields[1])
		n = min(n, len(fields)-2)
		for _, p := range fields[2 : 2+n] {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				z.paths = append(z.paths, pathStamp{p, fi.ModTime()})
			}
		}
		z.modules = map[string]bool{}
		for _, m := range fields[2+n:] {
			switch {
			case strings.HasPrefix(m, "="): // =MODULE=ms: an adaptive preload's import time
				name, ms, _ := strings.Cut(m[1:], "=")
				if v, err := strconv.ParseFloat(ms, 64); err == nil {
					if z.costs == nil {
						z.costs = map[string]float64{}
					}
					z.costs[name] = v
				}
			case strings.HasPrefix(m, "%rss="):
				z.rss, _ = strconv.ParseInt(m[len("%rss="):], 10, 64)
			default:
				z.modules[m] = true
			}
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

package engine

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// confinedCmd is a short helper command the server runs on a request's
// behalf where it would touch what a run may have written: probing an
// interpreter the request named, a uv build that executes package code.
// It runs through the launcher under the request's own sandbox settings
// and identity, exactly as a run would, with its own temp dir.
type confinedCmd struct {
	argv []string
	env  []string // TMPDIR and HOME (its temp dir) are added
	dir  string
	// writesWorkspace makes the workspace writable as a run's is; without
	// it the command reads the workspace as the run would (bound, idmapped)
	// but cannot write it.
	writesWorkspace bool
	// unprivileged refuses to run it as root (a run may fall back to root
	// without capabilities; a build that executes package code may not).
	unprivileged bool
	// readWrite are more directories it may write; each is handed to the
	// run user first (chown, mode 0700): they must be fresh directories
	// the server made for it.
	readWrite []string
	// readOnly is what it must read besides the system (under strict,
	// besides the few system trees strict allows).
	readOnly []string
	stdout   io.Writer
	stderr   io.Writer
	timeout  time.Duration // 0: only ctx bounds it
}

// runConfined runs c confined and returns its exit code (negative: killed
// by that signal). An error means it could not run at all, or was
// cancelled or timed out.
func (e *Engine) runConfined(ctx context.Context, settings sandbox.Settings, c confinedCmd) (int, error) {
	tmpDir, err := e.tmp.get()
	if err != nil {
		return 0, err
	}
	defer e.tmp.remove(tmpDir)
	var spec *sandbox.Spec
	if settings.Policy != sandbox.PolicyNone {
		// What it reads decides who it runs as; a path in the workspace
		// does not (the workspace is checked as such, and a run may make
		// any path in it a symlink meanwhile).
		need := []string{filepath.Dir(tmpDir)}
		for _, p := range c.readOnly {
			if !e.runWritable(filepath.Clean(p)) || filepath.Clean(p) == e.cfg.Workspace {
				need = append(need, p)
			}
		}
		mode := e.cfg.RunAs
		if c.unprivileged && (strings.EqualFold(mode, sandbox.RunAsNone) || mode == "root") {
			mode = sandbox.RunAsAuto // runs as root by choice; builds still do not
		}
		choice, err := e.runAs.choose(mode, e.cfg.Workspace, need, codeDir(e.cfg.StateDir))
		if err != nil {
			return 0, fmt.Errorf("run-as: %w", err)
		}
		if c.unprivileged && choice.Cred == nil && os.Geteuid() == 0 {
			return 0, fmt.Errorf("it must run as an unprivileged user, and runs here would run as root (%s): fix that (see pyexec doctor) or use --run-as USER", strings.Join(choice.Notes, "; "))
		}
		uid, gid := os.Geteuid(), os.Getegid()
		if choice.Cred != nil {
			uid, gid = int(choice.Cred.UID), int(choice.Cred.GID)
		}
		// Before Prepare: a directory already the run user's needs no
		// idmapping (sandbox.needsIdmap).
		for _, d := range append([]string{tmpDir}, c.readWrite...) {
			if err := handOver(d, uid, gid); err != nil {
				return 0, err
			}
		}
		spec = &sandbox.Spec{
			Settings:          settings,
			RunID:             fmt.Sprintf("%s-%08x", filepath.Base(tmpDir), crc32.ChecksumIEEE([]byte(tmpDir))),
			Workspace:         e.cfg.Workspace,
			WorkspaceReadOnly: !c.writesWorkspace,
			TmpDir:            tmpDir,
			ReadOnly:          c.readOnly,
			ReadWrite:         c.readWrite,
			Hidden:            hiddenTrees(e.cfg.StateDir),
			RunAs:             choice.Cred, // the launcher never falls back to root
		}
		if os.Geteuid() == 0 {
			if err := sandbox.PrivateProcAvailable(); err != nil {
				spec.NoPrivateProc = err.Error()
			}
		}
	}
	env := append(append([]string(nil), c.env...), "TMPDIR="+tmpDir, "HOME="+tmpDir)

	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return 0, fmt.Errorf("pipe: %w", err)
	}
	proc, err := e.launchers.Start(launcher.Spec{Argv: c.argv, Env: env, Dir: c.dir, Grace: e.cfg.KillGrace, Sandbox: spec},
		launcher.Options{Executable: e.cfg.Launcher, Stdout: outW, Stderr: errW})
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return 0, err
	}
	var copies sync.WaitGroup
	copies.Add(2)
	for _, p := range []struct {
		r *os.File
		w io.Writer
	}{{outR, c.stdout}, {errR, c.stderr}} {
		go func() {
			defer copies.Done()
			w := p.w
			if w == nil {
				w = io.Discard
			}
			_, _ = io.Copy(w, p.r)
		}()
	}
	var timeout <-chan time.Time
	if c.timeout > 0 {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		timeout = t.C
	}
	var stopped error
	select {
	case <-proc.Done():
	case <-ctx.Done():
		stopped = ctx.Err()
		proc.Terminate()
	case <-timeout:
		stopped = fmt.Errorf("timed out after %s", c.timeout)
		proc.Terminate()
	}
	ev, waitErr := proc.Wait()
	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
	}
	outR.Close()
	errR.Close()
	<-drained
	if spec != nil && ev.Sandbox == nil {
		_ = sandbox.Cleanup(spec.RunID)
	}
	switch {
	case stopped != nil:
		return 0, fmt.Errorf("%s: %w", filepath.Base(c.argv[0]), stopped)
	case waitErr != nil:
		return 0, fmt.Errorf("start %s: %w", c.argv[0], waitErr)
	}
	return ev.ExitCode, nil
}

// buildConfiner runs the uv commands of a build that executes package code
// (package uvenv) under req's sandbox settings, as its run would be: as the
// run user, writing only the directories the build names (the environment
// being built, its private cache) and its temp dir, plus the workspace for
// a project sync that may rewrite uv.lock (runs may write it too). Its
// network is the run's: under network deny, a build can use only what the
// operator's find-links offer.
func (e *Engine) buildConfiner(req *Request) uvenv.Confiner {
	settings, err := e.sandboxSettings(req)
	return func(ctx context.Context, c uvenv.Command) (int, error) {
		if err != nil {
			return 0, err
		}
		cc := confinedCmd{argv: c.Argv, env: c.Env, dir: c.Dir, readWrite: c.Writable,
			readOnly: c.Readable, stdout: c.Stdout, stderr: c.Stderr, unprivileged: true}
		cc.writesWorkspace = c.WritesWorkspace
		return e.runConfined(ctx, settings, cc)
	}
}

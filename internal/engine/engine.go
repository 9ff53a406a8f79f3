package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/uvenv"
	"github.com/pyexec/pyexec/internal/workspace"
)

// Engine runs Python requests. It is safe for concurrent use.
type Engine struct {
	cfg      Config
	ws       *workspace.Root // the path rules (package workspace)
	interps  interpreters
	envs     *uvenv.Manager     // dependency environments (environment.go)
	caps     capsCache          // what the kernel can enforce (sandbox.go)
	warm     *warmPool          // nil when warm interpreters are off (pool.go)
	tmp      *tmpDirs           // the runs' temp dirs (tmpdirs.go)
	tmpQuota *tmpQuota          // the filesystem holding them (tmpquota.go)
	runAs    runAsCache         // recent run-as choices (sandbox.go)
	watch    *workspace.Watcher // the files runs change (package workspace)
	live     sessionSet         // session interpreters (session_linux.go)
	// launchers are started ahead of the runs that need one (package
	// launcher: Pool); every launcher the engine starts comes from it.
	launchers *launcher.Pool
}

// forcedPrestartWait, when set (by tests), makes every launcher an engine
// starts come from its pool of launchers started ahead, waiting for one
// when none is ready: the cold pass runs every test through them.
var forcedPrestartWait bool

// New checks cfg, fills its defaults and prepares the state directory.
func New(cfg Config) (*Engine, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	for _, dir := range []string{cfg.StateDir, codeDir(cfg.StateDir), tmpRoot(cfg.StateDir)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create state dir %s: %w", dir, err)
		}
	}
	if err := writePyrt(pyrtDir(cfg.StateDir)); err != nil {
		return nil, err
	}
	ws, err := workspace.NewRoot(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	var e *Engine
	envs, err := newEnvironments(cfg, func(ctx context.Context, c uvenv.Command) (int, error) {
		return e.buildConfiner(&Request{})(ctx, c) // the server's own sandbox settings
	})
	if err != nil {
		return nil, err
	}
	quota, err := newTmpQuota(tmpRoot(cfg.StateDir), cfg.TmpLimit, cfg.Launcher)
	if err != nil {
		return nil, err
	}
	e = &Engine{cfg: cfg, ws: ws, envs: envs, tmpQuota: quota, tmp: newTmpDirs(quota.dir, tmpRoot(cfg.StateDir)), watch: workspace.NewWatcher(ws.HideTree(cfg.StateDir))}
	e.interps.writable = []string{cfg.Workspace, cfg.StateDir}
	e.interps.cache = newInterpCache(cfg.StateDir)
	e.interps.cwd, _ = os.Getwd()
	e.launchers = launcher.NewPool(cfg.Launcher, cfg.Prestart)
	if forcedPrestartWait && cfg.Prestart > 0 {
		e.launchers.SetWait(true)
	}
	e.warm = newWarmPool(e)
	return e, nil
}

// Close waits for the engine's background work to finish: new dependency
// environments are sealed (bytecode compiled, made read-only) after their
// first run has started. It stops the warm interpreters (runs still in
// flight on them are killed). The engine must not be used afterwards.
func (e *Engine) Close() error {
	e.live.killAll()
	e.closeWarm()
	e.launchers.Close()
	e.interps.closeDiscovery()
	e.watch.Close()
	e.tmp.close()
	e.envs.Wait()
	return e.tmpQuota.release()
}

// TmpLimit is the total size of all runs' temp dirs together (0: not
// capped) and, when it is not capped, why.
func (e *Engine) TmpLimit() (bytes int64, note string) { return e.tmpQuota.limit, e.tmpQuota.note }

// settle waits for the background cleanup of finished runs (their temp
// dirs and cgroups), so that what is left on disk is what a run left.
func (e *Engine) settle() {
	e.tmp.pending.Wait()
	e.launchers.Wait()
	if e.warm != nil {
		e.warm.cleanups.Wait()
	}
}

// Config returns the effective configuration (defaults filled in).
func (e *Engine) Config() Config { return e.cfg }

// Interpreters lists the Pythons this machine offers (discovered once,
// refreshed in the background: see discover.go).
func (e *Engine) Interpreters(ctx context.Context) []Interpreter { return e.interps.All(ctx) }

// CompleteInterpreters is Interpreters, waiting for uv's list of the
// interpreters it manages when no answer from it is known yet (it comes in
// the background otherwise): for a one-shot report like `pyexec doctor`.
func (e *Engine) CompleteInterpreters(ctx context.Context) []Interpreter {
	return e.interps.complete(ctx)
}

// DefaultInterpreter is the interpreter used when a request names none and
// its cwd has no .venv.
func (e *Engine) DefaultInterpreter(ctx context.Context) (Interpreter, error) {
	return e.defaultInterpreter(ctx)
}

func codeDir(state string) string { return filepath.Join(state, "code") }
func tmpRoot(state string) string { return filepath.Join(state, "tmp") }

// Run validates req, runs it to completion (or timeout, or ctx cancellation)
// and returns what it produced. A non-nil error means the request was
// rejected or could not be started (a *RequestError names the field); a run
// that fails is a Result with ExitCode != 0.
func (e *Engine) Run(ctx context.Context, req Request, obs Observer) (Result, error) {
	return e.RunWith(ctx, req, obs, Extras{})
}

// RunWith is Run with per-run additions (see Extras) that background jobs need.
func (e *Engine) RunWith(ctx context.Context, req Request, obs Observer, x Extras) (Result, error) {
	p, err := e.prepare(ctx, &req, obs, x)
	if err != nil {
		return Result{}, err
	}
	defer e.tmp.remove(p.tmpDir)
	defer p.uv.done()
	if x.prepared != nil {
		x.prepared(p)
	}
	if x.Dedicated {
		// A session: each cell has its own span (RunCell). One for the
		// session's whole life would mark every other run's changes as
		// concurrent while it is open.
		res, err := e.execute(ctx, p, obs)
		res.ResolvedDependencies = p.uv.resolvedDependencies()
		return res, err
	}
	span := e.watch.Begin()
	res, err := e.execute(ctx, p, obs)
	changes, note := span.End(p.rights)
	res.ResolvedDependencies = p.uv.resolvedDependencies()
	if err == nil {
		res.RunOutputs = collectOutputs(p.tmpDir)
		res.Files, res.FilesNote = fileChanges(changes), note
	}
	return res, err
}

// prepared is a request turned into what to exec.
type prepared struct {
	argv     []string
	env      []string
	dir      string
	stdin    string
	timeout  time.Duration
	tmpDir   string
	interp   Interpreter
	strategy string
	uv       *envUse          // the uv environment the run uses, or nil
	rights   workspace.Rights // of the run's user, for reads on its behalf

	extraFiles []*os.File // inherited by Python as fd 3, 4, ...
	sourceNUL  bool       // the code has NUL bytes (warm runs cannot reproduce those)
	dedicated  bool       // a session: its warm interpreter serves nothing else (Extras.Dedicated)

	sandbox      *sandbox.Spec
	sandboxNotes []string
}

func (e *Engine) prepare(ctx context.Context, req *Request, obs Observer, x Extras) (_ *prepared, err error) {
	if err := e.checkFields(req); err != nil {
		return nil, err
	}
	timeout, err := e.timeout(req.Timeout)
	if err != nil {
		return nil, err
	}
	if x.Timeout > 0 {
		timeout = x.Timeout
	}
	cwd, err := e.resolveCwd(req.Cwd)
	if err != nil {
		return nil, err
	}
	rights, err := e.readRights(req, cwd)
	if err != nil {
		return nil, err
	}
	var file string
	src := []byte(req.Code)
	if req.ScriptPath != "" {
		if file, err = e.resolveScript(req.ScriptPath, cwd); err != nil {
			return nil, err
		}
		// Read once, race-free and as the run user would (for its PEP 723
		// block); Python itself then opens it confined.
		if src, err = e.readWorkspaceFile("script_path", req.ScriptPath, file, rights, maxSourceBytes); err != nil {
			return nil, err
		}
	} else if file, err = e.writeCode(req.Code); err != nil {
		return nil, err
	}
	interp, strategy, err := e.chooseInterpreter(ctx, req, cwd, rights)
	if err != nil {
		return nil, err
	}
	uv, err := e.environment(ctx, req, src, file, cwd, interp, rights, obs)
	if err != nil {
		return nil, err
	}
	if uv != nil {
		defer func() {
			if err != nil {
				uv.done()
			}
		}()
		interp, strategy = uv.interp, uv.strategy
	}

	tmpDir, err := e.tmp.get()
	if err != nil {
		return nil, err
	}
	env := e.baseEnv(interp, strategy, tmpDir)
	e.setRuntimeEnv(env, tmpDir)
	if req.ScriptPath == "" {
		env.set("PYEXEC_CODE_FILE", file) // tracebacks call it <code>
	}
	x.applyBefore(env)
	if err := e.applyRequestEnv(env, req, cwd, rights); err != nil {
		os.RemoveAll(tmpDir)
		return nil, err
	}
	x.applyAfter(env)
	if x.tmpEnv != nil {
		for _, kv := range x.tmpEnv(tmpDir) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env.set(k, v)
			}
		}
	}
	// A preamble's wrapper script must stay readable under confinement.
	ro := append(append(slices.Clone(x.PythonPath), x.ReadOnly...), pyrtDir(e.cfg.StateDir))
	for _, a := range req.Preamble {
		if filepath.IsAbs(a) {
			ro = append(ro, a)
		}
	}
	box, boxNotes, err := e.sandboxFor(req, cwd, file, tmpDir, interp, env, ro)
	if err != nil {
		os.RemoveAll(tmpDir)
		return nil, err
	}
	argv := append([]string{interp.Path, "-u"}, req.Preamble...)
	argv = append(append(argv, file), req.Args...)
	envList := env.list()
	if err := checkEnvSize(envList, argv); err != nil {
		os.RemoveAll(tmpDir)
		return nil, err
	}
	return &prepared{
		argv: argv, env: envList, dir: cwd, stdin: req.Stdin, timeout: timeout,
		tmpDir: tmpDir, interp: interp, strategy: strategy, uv: uv, rights: rights, extraFiles: x.ExtraFiles,
		sourceNUL: bytes.IndexByte(src, 0) >= 0, sandbox: box, sandboxNotes: boxNotes, dedicated: x.Dedicated,
	}, nil
}

// CodeFile stores trusted server-side Python (such as the benchmark's
// profiling wrapper) where inline code goes and returns its path, for use in
// Request.Preamble: every run can read that directory, whatever confines it.
func (e *Engine) CodeFile(code string) (string, error) { return e.writeCode(code) }

// writeCode stores inline code in a file named by its content hash, so the
// same snippet is written once and tracebacks name a stable file.
func (e *Engine) writeCode(code string) (string, error) {
	sum := sha256.Sum256([]byte(code))
	path := filepath.Join(codeDir(e.cfg.StateDir), hex.EncodeToString(sum[:16])+".py")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("stat code file: %w", err)
	}
	tmp, err := os.CreateTemp(codeDir(e.cfg.StateDir), ".code-*")
	if err != nil {
		return "", fmt.Errorf("write code file: %w", err)
	}
	_, werr := tmp.WriteString(code)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write code file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write code file: %w", err)
	}
	return path, nil
}

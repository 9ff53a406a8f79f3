package engine

import (
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/workspace"
)

// capsCache holds the capabilities, detected on first use (Detect starts a
// few /bin/true probes and makes a probe cgroup).
type capsCache struct {
	once sync.Once
	caps sandbox.Capabilities
}

// Capabilities reports which confinement mechanisms this kernel offers and,
// for each missing one, why (shown by doctor and server_info).
func (e *Engine) Capabilities() sandbox.Capabilities {
	e.caps.once.Do(func() { e.caps.caps = sandbox.Detect() })
	return e.caps.caps
}

// sandboxFor builds the confinement spec of one run: the server's settings
// tightened by the request's, who runs Python, and what it may read and
// write. It may change HOME in env when the run-as user cannot reach it.
//
// extraRO are server-provided paths the run must read (the jobs helper
// module on PYTHONPATH).
func (e *Engine) sandboxFor(req *Request, cwd, file, tmpDir string, interp Interpreter, env *runEnv, extraRO []string) (*sandbox.Spec, []string, error) {
	settings, err := e.sandboxSettings(req)
	if err != nil {
		return nil, nil, err
	}
	// Nothing inside the workspace is granted or weighed by name: the
	// workspace is granted as a whole, and a run may have made any path in
	// it a symlink to something else by the time the launcher opens it (a
	// Landlock rule or a bind follows it). Nor does an interpreter path a
	// request named decide who the run executes as.
	ro := e.interpreterDirs(interp)
	if !e.runWritable(file) {
		ro = append(ro, file)
	}
	for _, p := range extraRO {
		if _, err := os.Stat(p); err == nil && !e.runWritable(filepath.Clean(p)) {
			ro = append(ro, p)
		}
	}
	var choice sandbox.RunAsChoice
	if settings.Policy != sandbox.PolicyNone {
		// Policy none is the seeds' mode: Python runs as the server does.
		need := append([]string{filepath.Dir(tmpDir)}, ro...)
		if interp.kind != kindRequest {
			need = append(need, interp.Path)
		}
		choice, err = e.runAs.choose(e.cfg.RunAs, cwd, need, codeDir(e.cfg.StateDir))
		if err != nil {
			return nil, nil, fmt.Errorf("run-as: %w", err)
		}
	}
	notes := choice.Notes
	if choice.IdmappedWorkspace {
		e.launchers.Expect(choice.Cred) // made ahead by the next launchers
	}
	if choice.Cred != nil {
		if home, ok := env.get("HOME"); ok && sandbox.CheckAccess(choice.Cred, home, sandbox.AccessRead|sandbox.AccessExec) != nil {
			env.set("HOME", tmpDir)
		}
	}
	spec := &sandbox.Spec{
		Settings: settings,
		// Unique across servers with different state dirs sharing a
		// machine (run cgroups of all of them may live side by side).
		RunID:     fmt.Sprintf("%s-%08x", filepath.Base(tmpDir), crc32.ChecksumIEEE([]byte(tmpDir))),
		Workspace: e.cfg.Workspace,
		TmpDir:    tmpDir,
		ReadOnly:  ro,
		Hidden:    hiddenTrees(e.cfg.StateDir),
		// When what the run needs cannot be made reachable for it, the
		// launcher fails the run; only --run-as none runs as root.
		RunAs: choice.Cred,
	}
	if settings.Policy != sandbox.PolicyNone && os.Geteuid() == 0 {
		if err := sandbox.PrivateProcAvailable(); err != nil {
			spec.NoPrivateProc = err.Error()
		}
	}
	return spec, notes, nil
}

// runWritable reports whether a run may have written path (or made it a
// symlink): it lies in the workspace, and not in the state dir (which a
// workspace may contain, e.g. /tmp: the state dir's files are the
// server's).
func (e *Engine) runWritable(path string) bool {
	return e.ws.Contains(path) && !workspace.Within(e.cfg.StateDir, path)
}

// runAsCache remembers recent run-as choices. Choosing walks every path a
// run needs and checks the run-as user's access at each step (a third of a
// millisecond, as much as a warm run's own confinement); consecutive runs
// almost always need the same paths, and a permission change is seen within
// runAsTTL.
type runAsCache struct {
	mu sync.Mutex
	m  map[string]runAsEntry
}

type runAsEntry struct {
	choice sandbox.RunAsChoice
	at     time.Time
}

const runAsTTL = 2 * time.Second

// choose is sandbox.ChooseRunAs, cached. A code file (written 0644 by the
// server into code) counts as its directory: snippets share a choice.
func (c *runAsCache) choose(mode, cwd string, paths []string, code string) (sandbox.RunAsChoice, error) {
	key := make([]string, 0, len(paths)+2)
	key = append(key, mode, cwd)
	for _, p := range paths {
		if filepath.Dir(p) == code {
			p = code
		}
		key = append(key, p)
	}
	k := strings.Join(key, "\x00")
	c.mu.Lock()
	ent, ok := c.m[k]
	c.mu.Unlock()
	if ok && time.Since(ent.at) < runAsTTL {
		return ent.choice, nil
	}
	choice, err := sandbox.ChooseRunAs(mode, cwd, paths)
	if err != nil {
		return choice, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= 256 {
		c.m = map[string]runAsEntry{}
	}
	c.m[k] = runAsEntry{choice, time.Now()}
	c.mu.Unlock()
	return choice, nil
}

// sandboxSettings merges the request's sandbox, network and limits into the
// server's; a request may only tighten them (the error names the field).
func (e *Engine) sandboxSettings(req *Request) (sandbox.Settings, error) {
	var reqLim sandbox.Limits
	if req.Limits != nil {
		reqLim = *req.Limits
	}
	settings, err := e.cfg.Sandbox.Tighten(sandbox.Settings{
		Policy:  sandbox.Policy(strings.ToLower(req.Sandbox)),
		Network: sandbox.Network(strings.ToLower(req.Network)),
		Limits:  reqLim,
	})
	if err == nil && settings.Limits.OpenFiles > 0 && settings.Limits.OpenFiles < 16 {
		err = fmt.Errorf("limits.open_files %d is below the minimum of 16", settings.Limits.OpenFiles)
	}
	if err != nil {
		field := "sandbox"
		switch {
		case strings.Contains(err.Error(), "limits."):
			field = "limits"
		case strings.Contains(err.Error(), "network"):
			field = "network"
		}
		// "limits: limits.memory_bytes: ..." reads better as
		// "limits: memory_bytes: ..."; badRequest drops "sandbox: ".
		msg := strings.Replace(trimPrefixes(err.Error(), field), "limits.", "", 1)
		if strings.Contains(msg, "_bytes") {
			msg = bytesInParens.ReplaceAllStringFunc(msg, func(m string) string {
				n, _ := strconv.ParseInt(strings.Trim(m, "()"), 10, 64)
				return "(" + FormatBytes(n) + ")"
			})
		}
		return sandbox.Settings{}, badRequest(field, "%s", msg)
	}
	settings.BestEffort = e.cfg.Sandbox.BestEffort
	return settings, nil
}

// bytesInParens finds the byte counts the sandbox package puts in its limit
// errors, to print them as "2 GiB".
var bytesInParens = regexp.MustCompile(`\(\d{4,}\)`)

// limitNote is the line appended to stderr when a run hit a limit, so a
// model reading only the text knows why it died.
func limitNote(limit string, lim sandbox.Limits) string {
	what := map[string]string{
		sandbox.LimitMemory:    fmt.Sprintf("memory limit (%d bytes)", lim.MemoryBytes),
		sandbox.LimitCPU:       fmt.Sprintf("CPU time limit (%d s)", lim.CPUSeconds),
		sandbox.LimitProcesses: fmt.Sprintf("process limit (%d processes/threads)", lim.MaxProcs),
		sandbox.LimitFileSize:  fmt.Sprintf("file size limit (%d bytes)", lim.FileSizeBytes),
	}[limit]
	if what == "" {
		what = limit + " limit"
	}
	return fmt.Sprintf("\n[LIMIT] the run exceeded its %s\n", what)
}

// sandboxSummary names the policy in force for the result, e.g.
// "strict (network deny, uid 65534)".
func sandboxSummary(s *sandbox.Spec) string {
	if s == nil {
		return ""
	}
	who := "server uid"
	if s.RunAs != nil {
		who = fmt.Sprintf("uid %d", s.RunAs.UID)
	} else if os.Geteuid() == 0 && s.Policy != sandbox.PolicyNone {
		who = "root without capabilities"
	}
	return fmt.Sprintf("%s (network %s, %s)", s.Policy, s.EffectiveNetwork(), who)
}

// hiddenTrees are what a workspace-policy run may not read: the state dir
// (other runs' code, temp dirs, logs) and the server user's home (keys,
// tokens, shell history). This matters most when a run falls back to root
// without capabilities: as owner it could read root's files. What a run
// needs from there (interpreter prefixes, uv environments, its code file,
// its tmp dir, the workspace) is granted explicitly and stays usable.
func hiddenTrees(stateDir string) []string {
	hidden := []string{stateDir}
	if home, err := os.UserHomeDir(); err == nil && home != "/" && home != "" {
		hidden = append(hidden, home)
	}
	return hidden
}

// RunAsPreview says who runs of the default interpreter in the workspace
// root execute as, and why, for doctor and server_info.
func (e *Engine) RunAsPreview(ctx context.Context) string {
	if e.cfg.Sandbox.Policy == sandbox.PolicyNone {
		return fmt.Sprintf("the server's user (uid %d): policy none", os.Geteuid())
	}
	paths := []string{codeDir(e.cfg.StateDir), tmpRoot(e.cfg.StateDir)}
	if interp, err := e.DefaultInterpreter(ctx); err == nil {
		paths = append(paths, interp.Path)
	}
	choice, err := sandbox.ChooseRunAs(e.cfg.RunAs, e.cfg.Workspace, paths)
	switch {
	case err != nil:
		return "runs are refused: " + err.Error()
	case choice.Cred != nil:
		s := fmt.Sprintf("%s (uid %d, gid %d)", choice.Cred.Name, choice.Cred.UID, choice.Cred.GID)
		if len(choice.Hidden) > 0 {
			s += fmt.Sprintf("; %s not searchable by %s: each run sees only what it needs under it (bound into a private mount namespace), the rest (keys, tokens, other runs' files) is invisible",
				strings.Join(choice.Hidden, ", "), choice.Cred.Name)
		}
		if choice.IdmappedWorkspace {
			s += fmt.Sprintf("; the workspace (owned by uid %d) is mounted idmapped for runs: %s writes it as its owner, files stay uid %d's on disk", os.Geteuid(), choice.Cred.Name, os.Geteuid())
		}
		if len(choice.Notes) > 0 {
			s += "; " + strings.Join(choice.Notes, "; ")
		}
		return s
	case len(choice.Notes) > 0:
		return strings.Join(choice.Notes, "; ")
	}
	return fmt.Sprintf("the server's user (uid %d)", os.Geteuid())
}

package executor

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/session"
)

// SessionExecutor is an Executor that keeps live Python sessions (package
// session). Front ends check for it with a type assertion; Local and the
// remote httpapi.Client both implement it.
type SessionExecutor interface {
	Executor
	SessionCreate(ctx context.Context, req session.CreateRequest) (session.Info, error)
	// SessionRun runs one cell, creating the session when the name is not
	// in use. progress, when non-nil, hears heartbeats while the cell runs.
	SessionRun(ctx context.Context, req session.RunRequest, progress ProgressFunc) (session.CellResult, error)
	SessionList(ctx context.Context) ([]session.Info, error)
	SessionGet(ctx context.Context, name string) (session.Info, error)
	SessionHistory(ctx context.Context, name string) (session.History, error)
	SessionClose(ctx context.Context, name string) (session.Info, error)
	SessionReset(ctx context.Context, name string) (session.Info, error)
	SessionInterrupt(ctx context.Context, name string) (session.Info, error)
	// SessionExport writes the session's history as a Jupyter notebook at
	// path in the workspace (relative to the session's cwd).
	SessionExport(ctx context.Context, name, path string) (SessionExportResult, error)
}

var _ SessionExecutor = (*Local)(nil)

// localSessions is Local's session manager, made on first use.
type localSessions struct {
	mu  sync.Mutex
	cfg session.Config
	m   *session.Manager
}

// ConfigureSessions sets the sessions' lifecycle; call it before the first
// session call.
func (l *Local) ConfigureSessions(cfg session.Config) {
	l.sessions.mu.Lock()
	l.sessions.cfg = cfg
	l.sessions.mu.Unlock()
}

// SessionManager returns the session manager (made on first use).
func (l *Local) SessionManager() *session.Manager {
	l.sessions.mu.Lock()
	defer l.sessions.mu.Unlock()
	if l.sessions.m == nil {
		l.sessions.m = session.New(l.eng, l.sessions.cfg)
	}
	return l.sessions.m
}

// CloseSessions kills every session (at shutdown).
func (l *Local) CloseSessions() {
	l.sessions.mu.Lock()
	m := l.sessions.m
	l.sessions.mu.Unlock()
	if m != nil {
		m.Shutdown()
	}
}

// SessionCreate implements SessionExecutor.
func (l *Local) SessionCreate(ctx context.Context, req session.CreateRequest) (session.Info, error) {
	return l.SessionManager().Create(ctx, req)
}

// SessionRun implements SessionExecutor.
func (l *Local) SessionRun(ctx context.Context, req session.RunRequest, progress ProgressFunc) (session.CellResult, error) {
	var c counter
	stop := c.heartbeat(progress, func(p *Progress) {
		p.Message = fmt.Sprintf("cell running in session %s for %.1fs", req.Session, p.ElapsedSeconds)
	})
	defer stop()
	return l.SessionManager().Run(ctx, req)
}

// SessionList implements SessionExecutor.
func (l *Local) SessionList(ctx context.Context) ([]session.Info, error) {
	return l.SessionManager().List(ctx)
}

// SessionGet implements SessionExecutor.
func (l *Local) SessionGet(ctx context.Context, name string) (session.Info, error) {
	return l.SessionManager().Get(ctx, name)
}

// SessionHistory implements SessionExecutor.
func (l *Local) SessionHistory(ctx context.Context, name string) (session.History, error) {
	return l.SessionManager().History(ctx, name)
}

// SessionClose implements SessionExecutor.
func (l *Local) SessionClose(ctx context.Context, name string) (session.Info, error) {
	return l.SessionManager().Close(ctx, name)
}

// SessionReset implements SessionExecutor.
func (l *Local) SessionReset(ctx context.Context, name string) (session.Info, error) {
	return l.SessionManager().Reset(ctx, name)
}

// SessionInterrupt implements SessionExecutor.
func (l *Local) SessionInterrupt(ctx context.Context, name string) (session.Info, error) {
	return l.SessionManager().Interrupt(ctx, name)
}

// IsSessionError reports whether err is a refused session call (and which).
func IsSessionError(err error) (*session.Error, bool) {
	var se *session.Error
	ok := errors.As(err, &se)
	return se, ok
}

// SessionExportResult says where a session's notebook was written.
type SessionExportResult struct {
	Session string `json:"session" jsonschema:"The session exported."`
	Path    string `json:"path" jsonschema:"Absolute path of the notebook written in the workspace."`
	Cells   int    `json:"cells" jsonschema:"Code cells in the notebook."`
	Bytes   int    `json:"bytes" jsonschema:"Size of the notebook file."`
}

// notebookWriter writes the notebook (base64, in DATA, assigned before it) to
// argv[1]: as a run, confined like one, so the workspace path is resolved
// and written with the run user's rights, never the server's.
const notebookWriter = `import base64, os, sys
dst = os.path.abspath(sys.argv[1])
data = base64.b64decode(DATA)
os.makedirs(os.path.dirname(dst), exist_ok=True)
tmp = dst + ".pyexec-tmp"
with open(tmp, "wb") as f:
    f.write(data)
os.replace(tmp, dst)
print(dst)
`

// SessionExport implements SessionExecutor: the session's history as a
// Jupyter notebook at path (relative to the session's cwd; .ipynb).
func (l *Local) SessionExport(ctx context.Context, name, path string) (SessionExportResult, error) {
	if !strings.HasSuffix(path, ".ipynb") || strings.ContainsRune(path, 0) {
		return SessionExportResult{}, &engine.RequestError{Field: "path", Message: fmt.Sprintf("%q must name a .ipynb file in the workspace", path)}
	}
	m := l.SessionManager()
	info, err := m.Get(ctx, name)
	if err != nil {
		return SessionExportResult{}, err
	}
	h, err := m.History(ctx, name)
	if err != nil {
		return SessionExportResult{}, err
	}
	nb, err := session.Notebook(h, info.Python)
	if err != nil {
		return SessionExportResult{}, err
	}
	code := "DATA = \"" + base64.StdEncoding.EncodeToString(nb) + "\"\n" + notebookWriter
	if limit := l.eng.Config().CodeLimit; len(code) > limit {
		return SessionExportResult{}, fmt.Errorf("the notebook of session %q is %s, more than can be written this way (%s encoded); read session://%s/history instead", name, engine.FormatBytes(int64(len(nb))), engine.FormatBytes(int64(limit)), name)
	}
	st := info.Settings
	res, err := l.eng.Run(ctx, engine.Request{Code: code, Args: []string{path}, Cwd: st.Cwd, Sandbox: st.Sandbox, Network: "deny", Python: st.Python, PythonVersion: st.PythonVersion}, nil)
	if err != nil {
		return SessionExportResult{}, err
	}
	if res.ExitCode != 0 {
		return SessionExportResult{}, &engine.RequestError{Field: "path", Message: "the notebook could not be written: " + lastLine(res.Stderr)}
	}
	return SessionExportResult{Session: name, Path: strings.TrimSpace(res.Stdout), Cells: len(h.Cells), Bytes: len(nb)}, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

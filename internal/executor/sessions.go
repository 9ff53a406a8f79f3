package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

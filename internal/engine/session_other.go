//go:build !linux

package engine

import (
	"context"
	"errors"
	"time"
)

// SessionProcess is a live session interpreter; sessions need Linux.
type SessionProcess struct{}

var errNoSessions = errors.New("sessions need Linux")

// StartSession is unsupported here.
func (e *Engine) StartSession(ctx context.Context, req Request, lifetime time.Duration) (*SessionProcess, error) {
	return nil, errNoSessions
}

func (sp *SessionProcess) PID() int                     { return 0 }
func (sp *SessionProcess) Python() string               { return "" }
func (sp *SessionProcess) Done() <-chan struct{}        { c := make(chan struct{}); close(c); return c }
func (sp *SessionProcess) Kill(reason string)           {}
func (sp *SessionProcess) Interrupt() error             { return errNoSessions }
func (sp *SessionProcess) Memory() (int64, int64)       { return 0, 0 }
func (sp *SessionProcess) End() (string, Result, error) { return "", Result{}, errNoSessions }
func (sp *SessionProcess) RunCell(ctx context.Context, n int, code string, timeout, grace time.Duration, obs Observer) (CellResult, error) {
	return CellResult{}, errNoSessions
}

// Install is unsupported here.
func (sp *SessionProcess) Install(ctx context.Context, requirements []string) (string, error) {
	return "", errNoSessions
}

package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// Run runs one cell, creating the session first when the name is not in
// use (with the request's settings).
func (m *Manager) Run(ctx context.Context, req RunRequest) (CellResult, error) {
	return m.RunObserved(ctx, req, "", nil)
}

// RunObserved is Run for a cell backed by a job: job names it (in the busy
// error and the session's info) and obs hears the cell's output as it
// comes.
func (m *Manager) RunObserved(ctx context.Context, req RunRequest, job string, obs engine.Observer) (CellResult, error) {
	if err := checkName(req.Session); err != nil {
		return CellResult{}, err
	}
	if strings.TrimSpace(req.Code) == "" {
		return CellResult{}, &engine.RequestError{Field: "code", Message: "is empty; give the Python to run in the session"}
	}
	timeout, err := engine.Seconds("timeout", req.Timeout, m.eng.Config().DefaultTimeout, m.eng.Config().MaxTimeout)
	if err != nil {
		return CellResult{}, err
	}
	if req.JobTimeout > 0 {
		timeout = req.JobTimeout // a job-backed cell: its job's limit, as for runs
	}
	m.mu.Lock()
	s, ok := m.sessions[req.Session]
	created := false
	if !ok {
		if s, err = m.reserveLocked(req.Session, "", req.Settings, m.cfg.IdleTimeout); err != nil {
			m.mu.Unlock()
			return CellResult{}, err
		}
		m.mu.Unlock()
		if err := m.start(ctx, s); err != nil {
			return CellResult{}, err
		}
		m.mu.Lock()
		created = true
	}
	switch s.status {
	case StatusLost, StatusClosed:
		m.mu.Unlock()
		return CellResult{}, m.goneError(s)
	case StatusBusy:
		defer m.mu.Unlock()
		return CellResult{}, m.busyError(s)
	case statusStarting:
		m.mu.Unlock()
		return CellResult{}, &Error{Kind: KindBusy, Session: s.name, Message: fmt.Sprintf("session %q is still starting; try again in a moment", s.name)}
	}
	if !created {
		if err := sameSettings(s.settings, req.Settings); err != nil {
			m.mu.Unlock()
			return CellResult{}, err
		}
	}
	n := s.count + 1
	s.status, s.running, s.runningSince, s.runningJob = StatusBusy, n, time.Now(), job
	proc := s.proc
	missing := s.missingLocked(req.Dependencies)
	m.saveLater(s)
	m.mu.Unlock()

	if len(missing) > 0 {
		if _, err := proc.Install(ctx, missing); err != nil {
			m.mu.Lock()
			defer m.mu.Unlock()
			s.running, s.runningJob = 0, ""
			if s.status == StatusBusy {
				s.status = StatusIdle
			}
			return CellResult{}, &engine.RequestError{Field: "dependencies", Message: fmt.Sprintf("installing %s into session %q failed, so the cell did not run (the session and its variables are unchanged): %v", strings.Join(missing, ", "), s.name, err)}
		}
		m.mu.Lock()
		s.installed = append(s.installed, missing...)
		m.mu.Unlock()
	}

	cell, runErr := proc.RunCell(ctx, n, req.Code, timeout, m.cfg.InterruptGrace, obs)

	ended := false // reported with this cell: its record goes once m.mu is free
	defer func() {
		if ended {
			m.releaseNow(s)
		}
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	s.count, s.running, s.runningJob, s.lastUsed = n, 0, "", time.Now()
	m.recordLocked(s, n, req.Code, cell)
	out := CellResult{CellResult: cell, Session: s.name, ExecutionCount: n, SessionCreated: created, Python: s.python, Installed: missing}
	switch {
	case errors.Is(runErr, engine.ErrSessionEnded):
		m.mu.Unlock()
		kill, res, endErr := proc.End() // the watcher records the same
		m.mu.Lock()
		out.Status = StatusLost
		out.LostReason, out.LostDetail = lostReason(kill, res, endErr, m.cfg)
		if s.status == StatusBusy {
			s.status, s.lostReason, s.lostDetail = StatusLost, out.LostReason, out.LostDetail
		}
		// The loss is reported here, with the cell's output: the name is free.
		if m.sessions[s.name] == s {
			delete(m.sessions, s.name)
			ended = true
		}
	case runErr != nil:
		s.status = StatusIdle
		m.saveLater(s)
		return out, runErr
	case cell.Exited != nil:
		s.status, s.lostReason = StatusClosed, reasonExited
		s.lostDetail = fmt.Sprintf("the cell called sys.exit(%d)", *cell.Exited)
		out.Status, out.LostReason, out.LostDetail = StatusClosed, s.lostReason, s.lostDetail
		delete(m.sessions, s.name)
		ended = true
	default:
		s.status = StatusIdle
		out.Status = StatusIdle
		out.ExpiresAt = m.expiresLocked(s)
		if s.timer != nil {
			s.timer.Reset(s.idle)
		}
		m.saveLater(s)
	}
	return out, nil
}

// historyCells and historyOutput bound what the history keeps.
const (
	historyCells  = 200
	historyOutput = 64 << 10
)

func (m *Manager) recordLocked(s *session, n int, code string, c engine.CellResult) {
	s.history = append(s.history, historyCell(n, code, c))
	if len(s.history) > historyCells {
		s.dropped += len(s.history) - historyCells
		s.history = slices.Clone(s.history[len(s.history)-historyCells:])
	}
	trimHistoryImages(s.history)
}

func cut(s string) string {
	if len(s) <= historyOutput {
		return s
	}
	return s[:historyOutput/2] + fmt.Sprintf("\n[... %d bytes cut ...]\n", len(s)-historyOutput) + s[len(s)-historyOutput/2:]
}

// History returns the cells a session ran.
func (m *Manager) History(ctx context.Context, name string) (History, error) {
	s, err := m.lookup(ctx, name)
	if err != nil {
		return History{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return History{Session: name, Cells: slices.Clone(s.history), Dropped: s.dropped}, nil
}

// missingLocked is what of want the session has neither been created with
// nor installed since (compared as written, after trimming).
func (s *session) missingLocked(want []string) []string {
	have := map[string]bool{}
	for _, d := range append(slices.Clone(s.settings.Dependencies), s.installed...) {
		have[strings.TrimSpace(d)] = true
	}
	var out []string
	for _, d := range want {
		if d = strings.TrimSpace(d); d != "" && !have[d] {
			have[d] = true
			out = append(out, d)
		}
	}
	return out
}

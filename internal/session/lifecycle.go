package session

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Shutdown kills every session; the manager refuses new ones afterwards.
// With a store, the sessions are first recorded lost (server_restarted),
// so the next server, or any replica, reports them so.
func (m *Manager) Shutdown() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stopWriting()
	m.mu.Lock()
	var procs []*engine.SessionProcess
	for _, s := range m.sessions {
		if s.proc != nil {
			procs = append(procs, s.proc)
		}
		if s.timer != nil {
			s.timer.Stop()
		}
	}
	m.mu.Unlock()
	for _, p := range procs {
		p.Kill("server_shutdown")
	}
	m.watchers.Wait()
}

// Create starts a session.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (Info, error) {
	if err := checkName(req.Session); err != nil {
		return Info{}, err
	}
	if len(req.Label) > 200 {
		return Info{}, &engine.RequestError{Field: "label", Message: fmt.Sprintf("is %d characters; the limit is 200", len(req.Label))}
	}
	idle := m.cfg.IdleTimeout
	if req.IdleTimeout < 0 {
		return Info{}, &engine.RequestError{Field: "idle_timeout", Message: "must be positive (seconds)"}
	}
	if req.IdleTimeout > 0 {
		idle = time.Duration(req.IdleTimeout * float64(time.Second))
		if idle > m.cfg.MaxLifetime {
			return Info{}, &engine.RequestError{Field: "idle_timeout", Message: fmt.Sprintf("%gs exceeds the sessions' maximum lifetime of %s", req.IdleTimeout, m.cfg.MaxLifetime)}
		}
	}
	m.mu.Lock()
	if old, ok := m.sessions[req.Session]; ok {
		m.mu.Unlock()
		if old.status == StatusLost || old.status == StatusClosed {
			return Info{}, m.goneError(old)
		}
		return Info{}, existsError(req.Session, old.created)
	}
	s, err := m.reserveLocked(req.Session, req.Label, req.Settings, idle)
	m.mu.Unlock()
	if err != nil {
		return Info{}, err
	}
	if err := m.start(ctx, s); err != nil {
		return Info{}, err
	}
	return m.Get(ctx, req.Session)
}

func existsError(name string, created time.Time) error {
	return &Error{Kind: KindExists, Session: name, Message: fmt.Sprintf("session %q already exists (created %s); run cells in it with run_python session=%q, or session_close it first", name, created.UTC().Format(time.RFC3339), name)}
}

// reserveLocked adds a starting entry, within the cap (m.mu held).
func (m *Manager) reserveLocked(name, label string, st Settings, idle time.Duration) (*session, error) {
	if m.closed {
		return nil, errors.New("the server is shutting down")
	}
	if live := m.live(); len(live) >= m.cfg.MaxSessions {
		sort.Slice(live, func(i, j int) bool { return live[i].lastUsed.Before(live[j].lastUsed) })
		var b strings.Builder
		fmt.Fprintf(&b, "%d sessions are open, the limit (--max-sessions) is %d; close one with session_close first. Open sessions, longest idle first:", len(live), m.cfg.MaxSessions)
		for _, s := range live {
			if s.status == StatusBusy {
				fmt.Fprintf(&b, " %s (busy),", s.name)
			} else {
				fmt.Fprintf(&b, " %s (idle %s),", s.name, time.Since(s.lastUsed).Round(time.Second))
			}
		}
		return nil, &Error{Kind: KindLimit, Message: strings.TrimSuffix(b.String(), ",")}
	}
	now := time.Now()
	s := &session{name: name, label: label, settings: st, idle: idle, created: now, lastUsed: now, status: statusStarting}
	m.sessions[name] = s
	return s, nil
}

// start claims s's name in the store and starts its interpreter; on
// failure the entry is removed.
func (m *Manager) start(ctx context.Context, s *session) error {
	if err := m.claim(ctx, s); err != nil {
		m.mu.Lock()
		if m.sessions[s.name] == s {
			delete(m.sessions, s.name)
		}
		m.mu.Unlock()
		return err
	}
	return m.restart(ctx, s)
}

// restart starts the interpreter of s, whose name is claimed; on failure
// the entry and its record are removed.
func (m *Manager) restart(ctx context.Context, s *session) error {
	t0 := time.Now()
	proc, err := m.eng.StartSession(ctx, s.settings.request(), m.cfg.MaxLifetime-time.Since(s.created))
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if m.sessions[s.name] == s {
			delete(m.sessions, s.name)
			m.releaseLater(s)
		}
		return err
	}
	s.proc, s.python, s.startSecs = proc, proc.Python(), time.Since(t0).Seconds()
	s.status, s.lastUsed = StatusIdle, time.Now()
	s.timer = time.AfterFunc(s.idle, func() { m.expire(s) })
	s.ended = make(chan struct{})
	m.watchers.Add(1)
	go m.watch(s, proc)
	m.saveLater(s)
	return nil
}

// watch turns the end of s's interpreter into its final state.
func (m *Manager) watch(s *session, proc *engine.SessionProcess) {
	defer m.watchers.Done()
	defer close(s.ended)
	kill, res, err := proc.End()
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.proc != proc {
		return // replaced by session_reset
	}
	s.peak, s.cpu = max(s.peak, res.PeakMemoryBytes, res.PeakRSSBytes), res.CPUUserSeconds+res.CPUSystemSeconds
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.status == StatusClosed {
		return
	}
	s.status = StatusLost
	s.lostReason, s.lostDetail = lostReason(kill, res, err, m.cfg)
	if kill == reasonIdle {
		s.status = StatusClosed
	}
	m.saveLater(s)
}

// Reasons a session ended that the server chose.
const (
	reasonTimeout         = "timeout"
	reasonInterruptFailed = "interrupt_failed"
	reasonIdle            = "idle_timeout"
	reasonClosed          = "closed"
	reasonExited          = "exited"
	reasonRestarted       = "server_restarted"
)

func lostReason(kill string, res engine.Result, err error, cfg Config) (string, string) {
	peak := ""
	if p := max(res.PeakMemoryBytes, res.PeakRSSBytes); p > 0 {
		peak = fmt.Sprintf(" (peak memory %.1f MB)", float64(p)/(1<<20))
	}
	switch {
	case kill == reasonTimeout:
		return kill, fmt.Sprintf("a cell ran past its timeout and did not stop within %s of KeyboardInterrupt (C code ignoring signals, or SIGINT blocked), so the session was killed%s", cfg.InterruptGrace, peak)
	case kill == reasonInterruptFailed:
		return kill, fmt.Sprintf("a cell did not stop within %s of KeyboardInterrupt, so the session was killed%s", cfg.InterruptGrace, peak)
	case kill == sandbox.LimitProcesses:
		return kill, "the processes a cell started filled the session's process limit and kept it full (a fork bomb), so the session was killed: nothing more could run in it" + peak
	case kill == reasonIdle:
		return kill, "closed after being idle for its idle timeout"
	case kill != "":
		return kill, "ended by the server (" + kill + ")" + peak
	case err != nil:
		return "crashed", "the session's interpreter could not run: " + err.Error()
	case res.LimitExceeded != "":
		return res.LimitExceeded, fmt.Sprintf("the session hit its %s limit and was killed by the kernel%s", res.LimitExceeded, peak)
	case res.TimedOut:
		return "max_lifetime", fmt.Sprintf("the session reached its maximum lifetime of %s", cfg.MaxLifetime)
	case res.ExitCode < 0:
		return "killed", fmt.Sprintf("the session's interpreter was killed by signal %d%s", -res.ExitCode, peak)
	}
	tail := strings.TrimSpace(res.Stderr)
	if len(tail) > 500 {
		tail = "..." + tail[len(tail)-500:]
	}
	detail := fmt.Sprintf("the session's interpreter exited with status %d%s", res.ExitCode, peak)
	if tail != "" {
		detail += ": " + tail
	}
	return reasonExited, detail
}

// expire closes s when it has been idle for its idle timeout.
func (m *Manager) expire(s *session) {
	m.mu.Lock()
	if m.sessions[s.name] != s || s.status != StatusIdle {
		m.mu.Unlock()
		return
	}
	if left := time.Until(s.lastUsed.Add(s.idle)); left > 0 {
		s.timer.Reset(left)
		m.mu.Unlock()
		return
	}
	proc := s.proc
	m.mu.Unlock()
	proc.Kill(reasonIdle)
}

// Interrupt raises KeyboardInterrupt in the session's running cell; the
// cell then has InterruptGrace to stop before the session is killed.
func (m *Manager) Interrupt(ctx context.Context, name string) (Info, error) {
	s, err := m.lookupLive(ctx, name)
	if err != nil {
		return Info{}, err
	}
	if s.status != StatusBusy {
		defer m.mu.Unlock()
		return m.infoLocked(s), nil
	}
	proc := s.proc
	m.mu.Unlock()
	if err := proc.Interrupt(); err != nil {
		return Info{}, err
	}
	return m.Get(ctx, name)
}

// Close kills a session and reports its final state.
func (m *Manager) Close(ctx context.Context, name string) (Info, error) {
	s, err := m.lookup(ctx, name)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	mine := m.sessions[name] == s
	if mine {
		delete(m.sessions, name)
	}
	wasGone := s.status == StatusLost || s.status == StatusClosed
	if !wasGone {
		s.status = StatusClosed
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	proc := s.proc
	m.mu.Unlock()
	if mine {
		m.releaseNow(s)
	}
	if proc != nil && !wasGone {
		proc.Kill(reasonClosed)
		_, res, _ := proc.End()
		m.mu.Lock()
		s.peak, s.cpu = max(s.peak, res.PeakMemoryBytes, res.PeakRSSBytes), res.CPUUserSeconds+res.CPUSystemSeconds
		m.mu.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.infoLocked(s), nil
}

// Reset replaces the session's interpreter by a fresh one with the same
// settings: an empty namespace, execution_count back to 0.
func (m *Manager) Reset(ctx context.Context, name string) (Info, error) {
	s, err := m.lookupLive(ctx, name)
	if err != nil {
		return Info{}, err
	}
	if s.status == StatusBusy {
		defer m.mu.Unlock()
		return Info{}, m.busyError(s)
	}
	old := s.proc
	s.status, s.proc = statusStarting, nil
	s.timer.Stop()
	m.mu.Unlock()
	old.Kill("reset")
	<-old.Done()
	s2 := &session{name: s.name, label: s.label, settings: s.settings, idle: s.idle, created: time.Now(), status: statusStarting, claimed: s.claimed}
	m.mu.Lock()
	m.sessions[name] = s2
	m.mu.Unlock()
	if err := m.restart(ctx, s2); err != nil {
		return Info{}, fmt.Errorf("reset: the new interpreter did not start (the session is gone): %w", err)
	}
	return m.Get(ctx, name)
}

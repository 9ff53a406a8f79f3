package session

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// Config sets the lifecycle of every session.
type Config struct {
	// MaxSessions bounds the live sessions; past it creation is refused.
	// Default: 4 per CPU, at least 8.
	MaxSessions int
	// IdleTimeout closes a session no call used for this long (default 30
	// minutes); a session may ask for a shorter or longer one, up to
	// MaxLifetime.
	IdleTimeout time.Duration
	// MaxLifetime ends every session this long after it started (default
	// 24 hours).
	MaxLifetime time.Duration
	// InterruptGrace is how long a cell has to stop after KeyboardInterrupt
	// (timeout, interrupt, cancelled request) before the session is killed
	// (default 2 s).
	InterruptGrace time.Duration
	// StateDir, when set, records the open sessions (sessions.json), so
	// that after a restart they are listed as lost ("server restarted").
	StateDir string
}

// DefaultMaxSessions is the cap on live sessions of this machine.
func DefaultMaxSessions() int { return max(8, 4*runtime.NumCPU()) }

func (c *Config) setDefaults() {
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions()
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 30 * time.Minute
	}
	if c.MaxLifetime <= 0 {
		c.MaxLifetime = 24 * time.Hour
	}
	if c.InterruptGrace <= 0 {
		c.InterruptGrace = 2 * time.Second
	}
}

// Manager holds the sessions of one server. It is safe for concurrent use.
type Manager struct {
	eng *engine.Engine
	cfg Config

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
	watchers sync.WaitGroup
}

// session is one entry of the registry; every field after proc is guarded
// by Manager.mu.
type session struct {
	name, label string
	settings    Settings
	idle        time.Duration
	created     time.Time
	startSecs   float64
	proc        *engine.SessionProcess

	status                 string
	lostReason, lostDetail string
	python                 string
	count                  int
	lastUsed               time.Time
	running                int
	runningSince           time.Time
	runningJob             string // the job backing the running cell, if any
	history                []HistoryCell
	installed              []string // requirements installed into its overlay, in order
	dropped                int
	peak                   int64
	cpu                    float64
	timer                  *time.Timer
	ended                  chan struct{} // closed once watch recorded the end
}

// statusStarting is an entry reserved while its interpreter starts.
const statusStarting = "starting"

// New makes a manager whose sessions run on eng.
func New(eng *engine.Engine, cfg Config) *Manager {
	cfg.setDefaults()
	m := &Manager{eng: eng, cfg: cfg, sessions: map[string]*session{}}
	m.recoverLost()
	return m
}

// Config is the effective configuration.
func (m *Manager) Config() Config { return m.cfg }

// Shutdown kills every session; the manager refuses new ones afterwards.
func (m *Manager) Shutdown() {
	m.mu.Lock()
	m.closed = true
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

func (m *Manager) live() []*session {
	var out []*session
	for _, s := range m.sessions {
		if s.status == StatusIdle || s.status == StatusBusy || s.status == statusStarting {
			out = append(out, s)
		}
	}
	return out
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
		return Info{}, &Error{Kind: KindExists, Session: req.Session, Message: fmt.Sprintf("session %q already exists (created %s); run cells in it with run_python session=%q, or session_close it first", req.Session, old.created.UTC().Format(time.RFC3339), req.Session)}
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

// start starts s's interpreter; on failure the entry is removed.
func (m *Manager) start(ctx context.Context, s *session) error {
	t0 := time.Now()
	proc, err := m.eng.StartSession(ctx, s.settings.request(), m.cfg.MaxLifetime-time.Since(s.created))
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if m.sessions[s.name] == s {
			delete(m.sessions, s.name)
		}
		return err
	}
	s.proc, s.python, s.startSecs = proc, proc.Python(), time.Since(t0).Seconds()
	s.status, s.lastUsed = StatusIdle, time.Now()
	s.timer = time.AfterFunc(s.idle, func() { m.expire(s) })
	s.ended = make(chan struct{})
	m.watchers.Add(1)
	go m.watch(s, proc)
	m.persistLocked()
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
	m.persistLocked()
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

// lookup returns the named session or a not-found error.
func (m *Manager) lookup(name string) (*session, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	s, ok := m.sessions[name]
	if !ok {
		return nil, &Error{Kind: KindNotFound, Session: name, Message: fmt.Sprintf("no session named %q; session_list shows the open ones, and run_python with session=%q creates it", name, name)}
	}
	return s, nil
}

// goneError reports a lost or expired session once: the entry goes, and
// the name is free again.
func (m *Manager) goneError(s *session) error {
	m.mu.Lock()
	if m.sessions[s.name] == s {
		delete(m.sessions, s.name)
		m.persistLocked()
	}
	m.mu.Unlock()
	verb := "was lost"
	if s.status == StatusClosed {
		verb = "was closed"
	}
	return &Error{Kind: KindLost, Session: s.name, Reason: s.lostReason,
		Message: fmt.Sprintf("session %q %s (%s): %s. Its variables are gone; this is reported once, and the next call with this name creates a new session.", s.name, verb, s.lostReason, s.lostDetail)}
}

func (m *Manager) busyError(s *session) error {
	job := ""
	if s.runningJob != "" {
		job = fmt.Sprintf(" as job %s (get_job reads its output)", s.runningJob)
	}
	return &Error{Kind: KindBusy, Session: s.name, Job: s.runningJob, Message: fmt.Sprintf("session %q is busy running cell %d%s for %.1fs; wait for it, or stop it with session_interrupt. One cell runs at a time per session.", s.name, s.running, job, time.Since(s.runningSince).Seconds())}
}

// Busy returns the busy error when the session exists and runs a cell (so
// a call can be refused before a job is made for it), else nil.
func (m *Manager) Busy(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sessions[name]; ok && s.status == StatusBusy {
		return m.busyError(s)
	}
	return nil
}

// Get describes one session.
func (m *Manager) Get(ctx context.Context, name string) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.lookup(name)
	if err != nil {
		return Info{}, err
	}
	return m.infoLocked(s), nil
}

// List describes every session, lost and expired ones included until
// their loss was reported.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []Info{}
	for _, s := range m.sessions {
		if s.status != statusStarting {
			out = append(out, m.infoLocked(s))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

func (m *Manager) infoLocked(s *session) Info {
	in := Info{Name: s.name, Label: s.label, Status: s.status, LostReason: s.lostReason, LostDetail: s.lostDetail,
		Settings: s.settings, Installed: slices.Clone(s.installed), Python: s.python, ExecutionCount: s.count, CreatedAt: s.created, LastUsedAt: s.lastUsed,
		StartSeconds: s.startSecs, PeakMemory: s.peak, CPUSeconds: s.cpu}
	switch s.status {
	case StatusIdle:
		in.IdleSeconds = time.Since(s.lastUsed).Seconds()
		in.ExpiresAt = m.expiresLocked(s)
	case StatusBusy:
		in.RunningCell, in.RunningSeconds, in.RunningJob = s.running, time.Since(s.runningSince).Seconds(), s.runningJob
		in.ExpiresAt = m.expiresLocked(s)
	}
	if s.proc != nil && (s.status == StatusIdle || s.status == StatusBusy) {
		now, peak := s.proc.Memory()
		in.MemoryBytes, in.PeakMemory = now, max(peak, s.peak)
	}
	return in
}

func (m *Manager) expiresLocked(s *session) time.Time {
	t := s.lastUsed.Add(s.idle)
	if end := s.created.Add(m.cfg.MaxLifetime); end.Before(t) {
		t = end
	}
	return t.UTC().Truncate(time.Second)
}

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
			m.persistLocked()
		}
	case runErr != nil:
		s.status = StatusIdle
		return out, runErr
	case cell.Exited != nil:
		s.status, s.lostReason = StatusClosed, reasonExited
		s.lostDetail = fmt.Sprintf("the cell called sys.exit(%d)", *cell.Exited)
		out.Status, out.LostReason, out.LostDetail = StatusClosed, s.lostReason, s.lostDetail
		delete(m.sessions, s.name)
		m.persistLocked()
	default:
		s.status = StatusIdle
		out.Status = StatusIdle
		out.ExpiresAt = m.expiresLocked(s)
		if s.timer != nil {
			s.timer.Reset(s.idle)
		}
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
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.lookup(name)
	if err != nil {
		return History{}, err
	}
	return History{Session: name, Cells: slices.Clone(s.history), Dropped: s.dropped}, nil
}

// Interrupt raises KeyboardInterrupt in the session's running cell; the
// cell then has InterruptGrace to stop before the session is killed.
func (m *Manager) Interrupt(ctx context.Context, name string) (Info, error) {
	m.mu.Lock()
	s, err := m.lookup(name)
	if err != nil {
		m.mu.Unlock()
		return Info{}, err
	}
	switch s.status {
	case StatusLost, StatusClosed:
		m.mu.Unlock()
		return Info{}, m.goneError(s)
	case StatusBusy:
		proc := s.proc
		m.mu.Unlock()
		if err := proc.Interrupt(); err != nil {
			return Info{}, err
		}
		return m.Get(ctx, name)
	}
	defer m.mu.Unlock()
	return m.infoLocked(s), nil
}

// Close kills a session and reports its final state.
func (m *Manager) Close(ctx context.Context, name string) (Info, error) {
	m.mu.Lock()
	s, err := m.lookup(name)
	if err != nil {
		m.mu.Unlock()
		return Info{}, err
	}
	delete(m.sessions, name)
	m.persistLocked()
	wasGone := s.status == StatusLost || s.status == StatusClosed
	if !wasGone {
		s.status = StatusClosed
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	proc := s.proc
	m.mu.Unlock()
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
	m.mu.Lock()
	s, err := m.lookup(name)
	if err != nil {
		m.mu.Unlock()
		return Info{}, err
	}
	switch s.status {
	case StatusLost, StatusClosed:
		m.mu.Unlock()
		return Info{}, m.goneError(s)
	case StatusBusy:
		defer m.mu.Unlock()
		return Info{}, m.busyError(s)
	case statusStarting:
		m.mu.Unlock()
		return Info{}, &Error{Kind: KindBusy, Session: s.name, Message: fmt.Sprintf("session %q is still starting", s.name)}
	}
	old := s.proc
	s.status, s.proc = statusStarting, nil
	s.timer.Stop()
	m.mu.Unlock()
	old.Kill("reset")
	<-old.Done()
	s2 := &session{name: s.name, label: s.label, settings: s.settings, idle: s.idle, created: time.Now(), status: statusStarting}
	m.mu.Lock()
	m.sessions[name] = s2
	m.mu.Unlock()
	if err := m.start(ctx, s2); err != nil {
		return Info{}, fmt.Errorf("reset: the new interpreter did not start (the session is gone): %w", err)
	}
	return m.Get(ctx, name)
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

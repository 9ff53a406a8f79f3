package session

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// The Manager's code is split by concern: this file holds the registry and
// lookups; lifecycle.go creates, ends and resets sessions; cells.go runs
// cells and keeps their history; store.go records sessions in the job
// store.

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
	// Store, when set, records the sessions (see Store): the restart
	// record, and with a shared store the names of the whole replica set.
	// Owner is this process's id there (the job manager's node id).
	Store Store
	Owner string
	// Cluster says the store is shared by replicas: session infos name
	// their owner node.
	Cluster bool
	Logger  *slog.Logger
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
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
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

	// The store writer (store.go): records to save (nil: to release).
	dirty      map[string]*session
	releases   map[string]struct{}
	kick       chan struct{}
	stopWriter chan struct{}
	stopOnce   sync.Once
	writerDone chan struct{}
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
	claimed                time.Time     // when its name was claimed in the store
}

// statusStarting is an entry reserved while its interpreter starts.
const statusStarting = "starting"

// New makes a manager whose sessions run on eng.
func New(eng *engine.Engine, cfg Config) *Manager {
	cfg.setDefaults()
	m := &Manager{eng: eng, cfg: cfg, sessions: map[string]*session{},
		dirty: map[string]*session{}, releases: map[string]struct{}{}, kick: make(chan struct{}, 1),
		stopWriter: make(chan struct{}), writerDone: make(chan struct{})}
	if cfg.Store != nil {
		go m.writer()
	}
	return m
}

// Config is the effective configuration.
func (m *Manager) Config() Config { return m.cfg }

func (m *Manager) live() []*session {
	var out []*session
	for _, s := range m.sessions {
		if s.status == StatusIdle || s.status == StatusBusy || s.status == statusStarting {
			out = append(out, s)
		}
	}
	return out
}

// lookup returns the named session held here. A name not held here is
// looked up in the store: another replica's session (ElsewhereError), a
// lost one (its error, once), or none (not found).
func (m *Manager) lookup(ctx context.Context, name string) (*session, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	s, ok := m.sessions[name]
	m.mu.Unlock()
	if !ok {
		return nil, m.stored(ctx, name)
	}
	return s, nil
}

// lookupLive is lookup for a call that acts on the session: a lost or
// closed one gives its error once (the name is free again), a starting one
// says so. On success m.mu is held, and the session is idle or busy.
func (m *Manager) lookupLive(ctx context.Context, name string) (*session, error) {
	s, err := m.lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	switch s.status {
	case StatusLost, StatusClosed:
		m.mu.Unlock()
		return nil, m.goneError(s)
	case statusStarting:
		m.mu.Unlock()
		return nil, &Error{Kind: KindBusy, Session: s.name, Message: fmt.Sprintf("session %q is still starting; try again in a moment", s.name)}
	}
	return s, nil
}

// goneError reports a lost or expired session once: the entry goes, and
// the name is free again.
func (m *Manager) goneError(s *session) error {
	m.mu.Lock()
	mine := m.sessions[s.name] == s
	if mine {
		delete(m.sessions, s.name)
	}
	m.mu.Unlock()
	if mine {
		m.releaseNow(s)
	}
	return goneMessage(s.name, s.status, s.lostReason, s.lostDetail)
}

func goneMessage(name, status, reason, detail string) error {
	verb := "was lost"
	if status == StatusClosed {
		verb = "was closed"
	}
	return &Error{Kind: KindLost, Session: name, Reason: reason,
		Message: fmt.Sprintf("session %q %s (%s): %s. Its variables are gone; this is reported once, and the next call with this name creates a new session.", name, verb, reason, detail)}
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

// Held reports whether this process holds the named session (so a router
// serves a call on it here).
func (m *Manager) Held(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.sessions[name]
	return ok
}

// Get describes one session. A lost session the store records (another
// replica's, or a previous server's) is described without being reported.
func (m *Manager) Get(ctx context.Context, name string) (Info, error) {
	if err := checkName(name); err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	s, ok := m.sessions[name]
	if ok {
		defer m.mu.Unlock()
		return m.infoLocked(s), nil
	}
	m.mu.Unlock()
	if m.cfg.Store != nil {
		rec, ok, err := m.cfg.Store.Get(ctx, name)
		if err != nil {
			return Info{}, fmt.Errorf("session %q: reading the job store: %w", name, err)
		}
		if ok && !rec.Open() {
			return m.recordInfo(rec), nil
		}
	}
	_, err := m.lookup(ctx, name)
	return Info{}, err
}

// List describes every session, lost and expired ones included until
// their loss was reported; with a shared store, the whole replica set's.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	m.mu.Lock()
	out := []Info{}
	have := map[string]bool{}
	for _, s := range m.sessions {
		have[s.name] = true
		if s.status != statusStarting {
			out = append(out, m.infoLocked(s))
		}
	}
	m.mu.Unlock()
	more, err := m.storedInfos(ctx, have)
	if err != nil {
		return nil, err
	}
	out = append(out, more...)
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

func (m *Manager) infoLocked(s *session) Info {
	in := Info{Name: s.name, Label: s.label, Status: s.status, LostReason: s.lostReason, LostDetail: s.lostDetail,
		Settings: s.settings, Installed: slices.Clone(s.installed), Python: s.python, ExecutionCount: s.count, CreatedAt: s.created, LastUsedAt: s.lastUsed,
		StartSeconds: s.startSecs, PeakMemory: s.peak, CPUSeconds: s.cpu}
	if m.cfg.Cluster {
		in.Node = m.cfg.Owner
	}
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

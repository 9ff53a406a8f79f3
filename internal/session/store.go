package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// Store is where sessions are recorded: the job store (SQLite in the state
// directory, or PostgreSQL shared by replicas; internal/jobs implements
// it). The record is what outlives the process: a restarted server, or any
// other replica, lists a session as lost with its reason instead of
// forgetting it, and a name is claimed in one place, so two replicas
// creating the same session cannot both win.
//
// Scope: on PostgreSQL a name is unique across the replica set; on SQLite
// each process sharing the state directory has its own names, and the
// sessions of a process that died are taken over (as lost, reason
// server_restarted) by the next one to start.
type Store interface {
	// Claim records rec as a new session unless its name is taken; then it
	// returns the record holding the name and false.
	Claim(ctx context.Context, rec Record) (existing Record, claimed bool, err error)
	// Save updates the record of a session rec.Owner holds and that is
	// not lost; ErrNotOwned when the store says otherwise (another node
	// declared this one lost, so the session must die here too).
	Save(ctx context.Context, rec Record) error
	// Get returns the record of name, if any.
	Get(ctx context.Context, name string) (Record, bool, error)
	// List returns every record in the store's scope.
	List(ctx context.Context) ([]Record, error)
	// Release removes the record of name held by owner; false when there
	// was none (another call reported or released it first).
	Release(ctx context.Context, name, owner string) (bool, error)
	// MarkLost marks the open sessions of the given owners lost.
	MarkLost(ctx context.Context, owners []string, reason, detail string) (int, error)
}

// ErrNotOwned is Store.Save's answer for a record that is no longer this
// owner's open session.
var ErrNotOwned = errors.New("session: the store no longer records this session as open here")

// Record is a session as the store keeps it: the settings summary (env
// values redacted), the status, times, the lost reason and peak memory.
type Record struct {
	Name           string    `json:"session"`
	Owner          string    `json:"owner"`
	Label          string    `json:"label,omitempty"`
	Settings       Settings  `json:"settings"`
	Status         string    `json:"status"`
	LostReason     string    `json:"lost_reason,omitempty"`
	LostDetail     string    `json:"lost_detail,omitempty"`
	ExecutionCount int       `json:"execution_count"`
	CreatedAt      time.Time `json:"created_at"`
	LastUsedAt     time.Time `json:"last_used_at"`
	PeakMemory     int64     `json:"peak_memory_bytes,omitempty"`
}

// Open reports whether the record is of a session that still runs.
func (r Record) Open() bool {
	return r.Status == StatusIdle || r.Status == StatusBusy || r.Status == statusStarting
}

// Reasons recorded by other nodes or a restart.
const (
	// ReasonNodeLost: the replica owning the session stopped heartbeating.
	ReasonNodeLost = "node_lost"
	// DetailNodeLost says so in words.
	DetailNodeLost  = "the pyexec replica running this session stopped heartbeating (it died or lost the database); a session lives in one replica's process and dies with it"
	detailRestarted = "the server restarted; sessions do not outlive the server process"
)

// ElsewhereError is returned for a session another replica owns: the
// caller (the replica router) forwards the call to Owner, or, when Owner
// is gone, marks its sessions lost and calls again.
type ElsewhereError struct {
	Session, Owner string
}

func (e *ElsewhereError) Error() string {
	return fmt.Sprintf("session %q is owned by replica %s", e.Session, e.Owner)
}

// redactSettings replaces env_vars values: the store is shared, and those
// values are often credentials.
func redactSettings(st Settings) Settings {
	st.EnvVars = engine.RedactEnv(st.EnvVars)
	return st
}

// storeRecordLocked is s as the store keeps it (m.mu held).
func (m *Manager) storeRecordLocked(s *session) Record {
	st := s.status
	if st == statusStarting {
		st = StatusIdle
	}
	return Record{Name: s.name, Owner: m.cfg.Owner, Label: s.label, Settings: redactSettings(s.settings), Status: st,
		LostReason: s.lostReason, LostDetail: s.lostDetail, ExecutionCount: s.count, CreatedAt: s.created, LastUsedAt: s.lastUsed, PeakMemory: s.peak}
}

// claim records a starting session in the store; the name may be held
// there by another replica or by a lost session (reported once here).
func (m *Manager) claim(ctx context.Context, s *session) error {
	if m.cfg.Store == nil {
		return nil
	}
	m.mu.Lock()
	rec := m.storeRecordLocked(s)
	_, pending := m.releases[s.name]
	delete(m.releases, s.name) // it would remove this new record
	m.mu.Unlock()
	if pending {
		if _, err := m.cfg.Store.Release(ctx, s.name, m.cfg.Owner); err != nil {
			return fmt.Errorf("session %q: releasing its previous record: %w", s.name, err)
		}
	}
	have, ok, err := m.cfg.Store.Claim(ctx, rec)
	if err != nil {
		return fmt.Errorf("session %q: recording it in the job store: %w", s.name, err)
	}
	if ok {
		m.mu.Lock()
		s.claimed = time.Now()
		m.mu.Unlock()
		return nil
	}
	if err := m.storedError(ctx, have); err != nil {
		return err
	}
	return m.claim(ctx, s) // the lost record was reported by another call meanwhile
}

// storedError is the answer for a name the store holds and this process
// does not: another replica's session, or a lost one (reported once, the
// record released). nil when the record went meanwhile.
func (m *Manager) storedError(ctx context.Context, rec Record) error {
	if rec.Open() && rec.Owner != m.cfg.Owner {
		return &ElsewhereError{Session: rec.Name, Owner: rec.Owner}
	}
	gone, err := m.cfg.Store.Release(ctx, rec.Name, rec.Owner)
	if err != nil {
		return fmt.Errorf("session %q: releasing its record: %w", rec.Name, err)
	}
	if !gone || rec.Open() {
		return nil // reported by someone else; or a stale open record of ours, now released
	}
	return goneMessage(rec.Name, rec.Status, rec.LostReason, rec.LostDetail)
}

// stored looks a name this process does not hold up in the store: the
// not-found error, another replica's session, or a lost one.
func (m *Manager) stored(ctx context.Context, name string) error {
	notFound := &Error{Kind: KindNotFound, Session: name, Message: fmt.Sprintf("no session named %q; session_list shows the open ones, and run_python with session=%q creates it", name, name)}
	if m.cfg.Store == nil {
		return notFound
	}
	rec, ok, err := m.cfg.Store.Get(ctx, name)
	if err != nil {
		return fmt.Errorf("session %q: reading the job store: %w", name, err)
	}
	if !ok {
		return notFound
	}
	if err := m.storedError(ctx, rec); err != nil {
		return err
	}
	return notFound
}

// saveLater queues s's record for the writer (the store is written off the
// cell's path: a cell's latency never waits on the database).
func (m *Manager) saveLater(s *session) {
	if m.cfg.Store == nil {
		return
	}
	m.dirty[s.name] = s
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// releaseNow drops the record of a session whose end was just reported
// (closed, or its loss given to a caller): at once, so no other call, here
// or on another replica, reports it again. Called without m.mu.
func (m *Manager) releaseNow(s *session) {
	if m.cfg.Store == nil {
		return
	}
	m.mu.Lock()
	delete(m.releases, s.name)
	if m.dirty[s.name] == s {
		delete(m.dirty, s.name)
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := m.cfg.Store.Release(ctx, s.name, m.cfg.Owner); err != nil {
		m.cfg.Logger.Warn("releasing a session record", "session", s.name, "err", err)
	}
}

// releaseLater queues the removal of s's record (m.mu held): a session
// that never started.
func (m *Manager) releaseLater(s *session) {
	if m.cfg.Store == nil {
		return
	}
	m.dirty[s.name] = nil
	m.releases[s.name] = struct{}{}
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// saveCoalesce is the least time between two flushes: a session running
// cells back to back costs at most 1/saveCoalesce writes a second, however
// short its cells, and a reader on another replica sees its state within
// about this long.
const saveCoalesce = 100 * time.Millisecond

// verifyEvery is how often a replica checks that the store still records
// its sessions as its own (an idle session is written to only when used).
const verifyEvery = 5 * time.Second

// writer saves the queued records until the manager shuts down; on a
// shared store it also checks the records of idle sessions.
func (m *Manager) writer() {
	defer close(m.writerDone)
	var verify <-chan time.Time
	if m.cfg.Cluster {
		t := time.NewTicker(verifyEvery)
		defer t.Stop()
		verify = t.C
	}
	for {
		select {
		case <-m.kick:
		case <-verify:
			m.verify()
			continue
		case <-m.stopWriter:
			m.flush()
			return
		}
		m.flush()
		select {
		case <-time.After(saveCoalesce):
		case <-m.stopWriter:
			m.flush()
			return
		}
	}
}

// flush writes what is queued. A session whose record another replica
// marked lost (this node was declared dead) is killed: it must not live on
// where no call can reach it.
func (m *Manager) flush() {
	m.mu.Lock()
	var saves []Record
	var procs []*session
	for name, s := range m.dirty {
		if s != nil && m.sessions[name] == s {
			saves = append(saves, m.storeRecordLocked(s))
			procs = append(procs, s)
		}
	}
	releases := m.releases
	m.dirty, m.releases = map[string]*session{}, map[string]struct{}{}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name := range releases {
		if _, err := m.cfg.Store.Release(ctx, name, m.cfg.Owner); err != nil {
			m.cfg.Logger.Warn("releasing a session record", "session", name, "err", err)
		}
	}
	for i, rec := range saves {
		err := m.cfg.Store.Save(ctx, rec)
		switch {
		case errors.Is(err, ErrNotOwned) && rec.Open():
			m.fence(procs[i])
		case err != nil && !errors.Is(err, ErrNotOwned):
			m.cfg.Logger.Warn("recording a session", "session", rec.Name, "err", err)
		}
	}
}

// verify fences the open sessions held here whose record is gone, lost
// or another replica's: this replica was declared lost while cut off, and
// no call may reach them here any more.
func (m *Manager) verify() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed := time.Now()
	recs, err := m.cfg.Store.List(ctx)
	if err != nil {
		return // the database is unreachable: nothing to conclude
	}
	mine := map[string]bool{}
	for _, r := range recs {
		if r.Owner == m.cfg.Owner && r.Open() {
			mine[r.Name] = true
		}
	}
	m.mu.Lock()
	var fenced []*session
	for name, s := range m.sessions {
		// Only sessions claimed before the list was read can be missing from it.
		if (s.status == StatusIdle || s.status == StatusBusy) && !mine[name] && !s.claimed.IsZero() && s.claimed.Before(listed) {
			fenced = append(fenced, s)
		}
	}
	m.mu.Unlock()
	for _, s := range fenced {
		m.fence(s)
	}
}

// fence kills a session the store says is lost (another replica declared
// this one dead while it was cut off).
func (m *Manager) fence(s *session) {
	m.mu.Lock()
	proc := s.proc
	live := m.sessions[s.name] == s && (s.status == StatusIdle || s.status == StatusBusy)
	if live {
		delete(m.sessions, s.name) // the store's lost record is what callers see
	}
	m.mu.Unlock()
	if live && proc != nil {
		m.cfg.Logger.Warn("a session's record says it is lost (this replica was declared dead); killing it", "session", s.name)
		proc.Kill(ReasonNodeLost)
	}
}

// stopWriting flushes and stops the writer, then records every session
// still open here as lost (server_restarted): the next server, or any
// replica, reports them so.
func (m *Manager) stopWriting() {
	if m.cfg.Store == nil {
		return
	}
	first := false
	m.stopOnce.Do(func() { first = true; close(m.stopWriter) })
	<-m.writerDone
	if !first {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := m.cfg.Store.MarkLost(ctx, []string{m.cfg.Owner}, reasonRestarted, detailRestarted); err != nil {
		m.cfg.Logger.Warn("recording the sessions as lost at shutdown", "err", err)
	}
}

// storedInfos are the sessions the store lists that this process does not
// hold: other replicas' and lost ones.
func (m *Manager) storedInfos(ctx context.Context, have map[string]bool) ([]Info, error) {
	if m.cfg.Store == nil {
		return nil, nil
	}
	recs, err := m.cfg.Store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing sessions in the job store: %w", err)
	}
	var out []Info
	for _, r := range recs {
		if have[r.Name] {
			continue
		}
		in := m.recordInfo(r)
		out = append(out, in)
	}
	return out, nil
}

// recordInfo describes a session from its record alone.
func (m *Manager) recordInfo(r Record) Info {
	in := Info{Name: r.Name, Label: r.Label, Status: r.Status, LostReason: r.LostReason, LostDetail: r.LostDetail, Settings: r.Settings,
		ExecutionCount: r.ExecutionCount, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, PeakMemory: r.PeakMemory}
	if m.cfg.Cluster {
		in.Node = r.Owner
	}
	return in
}

// Owner names the replica holding the session when that is not this
// process: "" when this process holds it, or the store records no open
// session of that name elsewhere (the call is then served here: created,
// reported lost, or not found).
func (m *Manager) Owner(ctx context.Context, name string) (string, error) {
	if m.cfg.Store == nil || checkName(name) != nil || m.Held(name) {
		return "", nil
	}
	rec, ok, err := m.cfg.Store.Get(ctx, name)
	if err != nil {
		return "", fmt.Errorf("session %q: reading the job store: %w", name, err)
	}
	if ok && rec.Open() && rec.Owner != m.cfg.Owner {
		return rec.Owner, nil
	}
	return "", nil
}

// MarkNodeLost records the open sessions of a replica that went silent as
// lost (node_lost); the next call on each gets that error once.
func (m *Manager) MarkNodeLost(ctx context.Context, nodes []string) (int, error) {
	if m.cfg.Store == nil {
		return 0, nil
	}
	return m.cfg.Store.MarkLost(ctx, nodes, ReasonNodeLost, DetailNodeLost)
}

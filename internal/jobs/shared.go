package jobs

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/pgdb"
)

// A Manager on a PostgreSQL store is one replica among several sharing the
// jobs (see pgstore.go for the fencing rules):
//
//   - Start puts a job in the shared queue; every replica with a free slot
//     claims the oldest it should run (FOR UPDATE SKIP LOCKED), woken by
//     NOTIFY on queueChannel, preferring jobs whose environment it has
//     built. Synchronous runs (RunSync) run where they landed.
//   - A claim is a lease with an epoch, renewed every NodeLostAfter/5.
//     Any replica fails the unfinished jobs whose lease ran out with
//     MsgNodeLost; the silent node's later writes are fenced off.
//   - A running job's output goes to its local log files as with SQLite and
//     is flushed to pyexec_job_output whenever it grows (at most every
//     flushCoalesce, at least every FlushInterval). Other replicas read the
//     flushed bytes, woken by NOTIFY on changeChannel, as do all replicas
//     once the job ended. Offsets are the same byte offsets everywhere.
//   - Cancel on another replica asks the owner through the store and a
//     notification, and waits for the job to end.

// Notification channels.
const (
	queueChannel  = "pyexec_queue"
	changeChannel = "pyexec_job_changes"
)

// Defaults of the shared-store settings.
const (
	DefaultNodeLostAfter = 15 * time.Second
	DefaultFlushInterval = 250 * time.Millisecond
	// flushCoalesce is the least time between two flushes of one job: a job
	// printing constantly costs at most 40 writes a second, and a reader on
	// another node still sees a line within about this long.
	flushCoalesce = 25 * time.Millisecond
	// claimPoll is how often a replica with free slots looks at the queue
	// without being woken (a missed notification, an affinity wait ending).
	claimPoll = time.Second
	// foreignPoll is how often a waiting reader re-reads a job of another
	// node without being woken.
	foreignPoll = time.Second
	// finalRetry bounds how long a final state or last flush is retried
	// while the database is unreachable (a PostgreSQL restart).
	finalRetry   = time.Minute
	warmEnvsKept = 64
)

// changeNote is the payload of changeChannel.
type changeNote struct {
	Job    string `json:"j"`
	Node   string `json:"n"`
	Status Status `json:"s,omitempty"`
	Output bool   `json:"o,omitempty"`
	Done   bool   `json:"d,omitempty"`
	Cancel bool   `json:"c,omitempty"` // a request to the owner to cancel the job
}

// shared is a Manager's part in a replica set.
type shared struct {
	m     *Manager
	db    *pgdb.DB
	st    *pgStore
	ownDB bool // opened from Config.StoreURL: closed with the Manager

	kick chan struct{} // wakes the claimer
	// paused stops lease renewals (tests: a node that went silent).
	paused atomic.Bool

	mu      sync.Mutex
	waiters map[string]chan struct{} // closed when a job of another node changes
	recent  map[string]recentJob     // background jobs that ended here lately (recentKeep)
	// recentSwept is when expired entries of recent were last removed.
	recentSwept time.Time
	warm        []string // env keys of environments built here, newest last
}

func openShared(ctx context.Context, cfg Config, m *Manager) error {
	db, own := cfg.DB, false
	if db == nil {
		var err error
		if db, err = pgdb.Open(ctx, cfg.StoreURL, pgdb.Options{Logger: m.log}); err != nil {
			return err
		}
		own = true
	}
	if cfg.NodeID != "" {
		m.owner = cfg.NodeID
	}
	sh := &shared{
		m: m, db: db, ownDB: own,
		st:      &pgStore{db: db, node: m.owner, bound: cfg.NodeLostAfter},
		kick:    make(chan struct{}, 1),
		waiters: map[string]chan struct{}{},
		recent:  map[string]recentJob{},
	}
	m.store, m.sh = sh.st, sh
	return nil
}

// startLoops starts the listener, the claimer and the lease keeper.
func (sh *shared) startLoops() {
	m := sh.m
	m.wg.Add(3)
	go func() {
		defer m.wg.Done()
		sh.db.Listen(m.baseCtx, []string{queueChannel, changeChannel}, sh.heard, func() {
			sh.wakeAll() // notifications may have been missed while disconnected
			sh.wakeClaimer()
		})
	}()
	go func() { defer m.wg.Done(); sh.claimLoop() }()
	go func() { defer m.wg.Done(); sh.leaseLoop() }()
}

func (sh *shared) close() error {
	if sh.ownDB {
		return sh.db.Close()
	}
	return nil
}

// NodeID is this Manager's id among the replicas (its owner id).
func (m *Manager) NodeID() string { return m.owner }

// Shared reports whether the Manager is one replica of a shared store.
func (m *Manager) Shared() bool { return m.sh != nil }

// Slots reports free and total run slots (for membership heartbeats).
func (m *Manager) Slots() (free, total int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(m.cfg.MaxConcurrent-m.running-len(m.queue), 0), m.cfg.MaxConcurrent
}

// WarmEnvs lists the environment keys (see envKey) built on this node
// recently, for membership heartbeats and queue affinity.
func (m *Manager) WarmEnvs() []string {
	if m.sh == nil {
		return nil
	}
	m.sh.mu.Lock()
	defer m.sh.mu.Unlock()
	return slices.Clone(m.sh.warm)
}

// envKey names the dependency environment a request needs, so the queue
// can prefer a node that has built it: the interpreter asked for and the
// sorted requirements. "" when the request declares none (its script may
// still carry PEP 723 metadata, which is only read where it runs).
func envKey(req engine.Request) string {
	if len(req.Dependencies) == 0 {
		return ""
	}
	deps := slices.Clone(req.Dependencies)
	for i := range deps {
		deps[i] = strings.ToLower(strings.TrimSpace(deps[i]))
	}
	slices.Sort(deps)
	sum := sha256.Sum256([]byte(req.Python + "\x00" + req.PythonVersion + "\x00" + strings.Join(deps, "\x00")))
	return hex.EncodeToString(sum[:8])
}

func (sh *shared) isWarm(key string) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return slices.Contains(sh.warm, key)
}

func (sh *shared) rememberEnv(key string) {
	if key == "" {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.warm = slices.DeleteFunc(sh.warm, func(k string) bool { return k == key })
	sh.warm = append(sh.warm, key)
	if len(sh.warm) > warmEnvsKept {
		sh.warm = sh.warm[len(sh.warm)-warmEnvsKept:]
	}
}

func (sh *shared) note(n changeNote) {
	n.Node = sh.m.owner
	b, _ := json.Marshal(n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sh.db.Notify(ctx, changeChannel, string(b)); err != nil {
		sh.m.log.Debug("notifying a job change", "job", n.Job, "err", err)
	}
}

// heard handles a notification.
func (sh *shared) heard(channel, payload string) {
	if channel == queueChannel {
		sh.wakeClaimer()
		return
	}
	var n changeNote
	if json.Unmarshal([]byte(payload), &n) != nil || n.Job == "" {
		return
	}
	if n.Cancel {
		if sh.m.lookup(n.Job) != nil {
			go sh.cancelLocal(n.Job)
		}
		return
	}
	if n.Node == sh.m.owner {
		return // published locally already
	}
	sh.wake(n.Job)
	sh.m.hub.publish(Event{JobID: n.Job, Status: n.Status, Output: n.Output, Done: n.Done})
}

func (sh *shared) cancelLocal(id string) {
	ctx, cancel := context.WithTimeout(sh.m.baseCtx, time.Minute)
	defer cancel()
	if _, err := sh.m.Cancel(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
		sh.m.log.Warn("cancelling a job at another node's request", "job", id, "err", err)
	}
}

// waiter returns a channel closed at the next change of job id on another
// node. Take it before reading, so a change in between is not missed.
func (sh *shared) waiter(id string) <-chan struct{} {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c, ok := sh.waiters[id]
	if !ok {
		c = make(chan struct{})
		sh.waiters[id] = c
	}
	return c
}

func (sh *shared) wake(id string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c, ok := sh.waiters[id]; ok {
		close(c)
		delete(sh.waiters, id)
	}
}

func (sh *shared) wakeAll() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for id, c := range sh.waiters {
		close(c)
		delete(sh.waiters, id)
	}
}

func (sh *shared) wakeClaimer() {
	select {
	case sh.kick <- struct{}{}:
	default:
	}
}

// enqueue puts a new job in the shared queue, or runs it here at once
// when nothing waits in the queue and this node has a free slot (and the
// job's environment, if it needs one): claimed from the start, without a
// round through the queue. One statement decides and inserts (pgStore.enqueue).
func (sh *shared) enqueue(ctx context.Context, lj *liveJob) error {
	m := sh.m
	key := envKey(lj.req)
	m.mu.Lock()
	here := !m.closed && m.running+len(m.queue) < m.cfg.MaxConcurrent && (key == "" || sh.isWarm(key))
	if !here {
		// Not ours to run now: no need to hold the dispatcher while the
		// database answers.
		m.mu.Unlock()
	}
	inserted, owned, queued, err := sh.st.enqueue(ctx, &lj.job, here, m.cfg.MaxQueue)
	switch {
	case err != nil:
	case !inserted:
		err = fmt.Errorf("%w (%d pending across the replicas; limit: --max-queue %d)", ErrBusy, queued, m.cfg.MaxQueue)
	case owned:
		lj.claimed = true
		m.live[lj.job.ID] = lj
		m.queue = append(m.queue, lj)
		m.dispatchLocked()
	}
	if here {
		m.mu.Unlock()
	}
	if err != nil {
		if errors.Is(err, ErrBusy) {
			return err
		}
		return fmt.Errorf("jobs: start: %w", err)
	}
	if !owned {
		sh.wakeClaimer()
	}
	return nil
}

func (sh *shared) claimLoop() {
	m := sh.m
	t := time.NewTicker(claimPoll)
	defer t.Stop()
	var lastErr time.Time
	for {
		select {
		case <-m.baseCtx.Done():
			return
		case <-sh.kick:
		case <-t.C:
		}
		for {
			if free, _ := m.Slots(); free == 0 {
				break
			}
			ctx, cancel := context.WithTimeout(m.baseCtx, 10*time.Second)
			j, req, err := sh.st.claim(ctx, m.WarmEnvs())
			cancel()
			if errors.Is(err, sql.ErrNoRows) {
				break
			}
			if err != nil && j.ID == "" {
				if m.baseCtx.Err() == nil && time.Since(lastErr) > 10*time.Second {
					m.log.Warn("claiming queued jobs", "err", err)
					lastErr = time.Now()
				}
				break
			}
			sh.adopt(j, req, err)
		}
	}
}

// adopt makes a claimed job this Manager's: queued locally and started as
// soon as the dispatcher has a slot (the claim only happens when it has).
func (sh *shared) adopt(j Job, req engine.Request, claimErr error) {
	m := sh.m
	lj := &liveJob{
		m:       m,
		req:     req,
		timeout: time.Duration(j.TimeoutSeconds * float64(time.Second)),
		changed: make(chan struct{}),
		done:    make(chan struct{}),
		job:     j,
		claimed: true,
	}
	if claimErr != nil {
		m.finishUnstarted(lj, StatusFailed, claimErr.Error())
		return
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		sh.release(lj)
		return
	}
	m.live[j.ID] = lj
	m.queue = append(m.queue, lj)
	m.dispatchLocked()
	m.mu.Unlock()
	m.hub.publish(Event{JobID: j.ID, Status: StatusPending})
}

// release hands a claimed job that never started back to the queue.
func (sh *shared) release(lj *liveJob) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sh.st.release(ctx, lj.job.ID, lj.job.epoch); err != nil {
		sh.m.log.Warn("handing a job back to the queue", "job", lj.job.ID, "err", err)
		return
	}
	if err := sh.db.Notify(ctx, queueChannel, ""); err != nil {
		sh.m.log.Debug("notifying the queue", "err", err)
	}
}

// leaseLoop renews this node's leases, stops runs whose lease was lost,
// passes on cancel requests missed as notifications, and fails the jobs of
// nodes that went silent.
func (sh *shared) leaseLoop() {
	m := sh.m
	t := time.NewTicker(max(m.cfg.NodeLostAfter/5, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-m.baseCtx.Done():
			return
		case <-t.C:
		}
		if sh.paused.Load() {
			continue
		}
		ctx, cancel := context.WithTimeout(m.baseCtx, m.cfg.NodeLostAfter)
		sh.renew(ctx)
		sh.reap(ctx)
		cancel()
	}
}

func (sh *shared) renew(ctx context.Context) {
	m := sh.m
	m.mu.Lock()
	held := make(map[string]*liveJob, len(m.live))
	for id, lj := range m.live {
		lj.mu.Lock()
		inMemory := lj.inMemory // a lazy job has no row, so no lease (spill.go)
		lj.mu.Unlock()
		if !inMemory {
			held[id] = lj
		}
	}
	m.mu.Unlock()
	if len(held) == 0 {
		return
	}
	ids := make([]string, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	leases, err := sh.st.renew(ctx, ids)
	if err != nil {
		if m.baseCtx.Err() == nil {
			m.log.Warn("renewing job leases", "err", err)
		}
		return
	}
	var lost, cancels []*liveJob
	m.mu.Lock()
	for id, lj := range held {
		if m.live[id] != lj {
			continue // ended meanwhile
		}
		l, ok := leases[id]
		switch {
		case !ok || l.epoch != lj.job.epoch:
			lost = append(lost, lj)
		case l.cancelRequested:
			cancels = append(cancels, lj)
		}
	}
	m.mu.Unlock()
	for _, lj := range lost {
		m.fence(lj, "lease renewal")
	}
	for _, lj := range cancels {
		go sh.cancelLocal(lj.job.ID)
	}
}

func (sh *shared) reap(ctx context.Context) {
	ids, err := sh.st.reapExpired(ctx, time.Now().UTC())
	if err != nil {
		if sh.m.baseCtx.Err() == nil {
			sh.m.log.Warn("failing jobs of lost nodes", "err", err)
		}
		return
	}
	if len(ids) > 0 {
		sh.m.log.Warn("failed the jobs of nodes that went silent", "count", len(ids), "reason", "node_lost")
	}
	for _, id := range ids {
		sh.wake(id)
		sh.m.hub.publish(Event{JobID: id, Status: StatusFailed, Done: true})
		sh.note(changeNote{Job: id, Status: StatusFailed, Done: true})
	}
}

// fence stops a job whose lease this node lost: its state in the store is
// no longer ours to write (another node failed it as node_lost).
func (m *Manager) fence(lj *liveJob, why string) {
	lj.mu.Lock()
	if lj.job.Status.Terminal() || lj.fenced {
		lj.mu.Unlock()
		return
	}
	lj.fenced = true
	cancel := lj.cancel
	status := lj.job.Status
	lj.mu.Unlock()
	m.log.Warn("lost the lease of a job; stopping it", "job", lj.job.ID, "status", status, "noticed", why)
	m.mu.Lock()
	queued := !lj.dequeued
	if queued {
		m.queue = slices.DeleteFunc(m.queue, func(q *liveJob) bool { return q == lj })
		delete(m.live, lj.job.ID)
	}
	m.mu.Unlock()
	if queued {
		lj.mu.Lock()
		now := time.Now().UTC()
		lj.job.Status, lj.job.Error, lj.job.FinishedAt = StatusFailed, MsgNodeLost, &now
		lj.runErr = errors.New(MsgNodeLost)
		lj.broadcastLocked()
		lj.mu.Unlock()
		close(lj.done)
		return
	}
	if cancel != nil {
		cancel()
	}
}

// flusher copies a running job's new log bytes to the store.
type flusher struct {
	sh      *shared
	lj      *liveJob
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	flushed [2]int64 // stdout, stderr bytes in the store
}

func (sh *shared) startFlusher(lj *liveJob) *flusher {
	f := &flusher{sh: sh, lj: lj, kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go f.loop()
	return f
}

func (f *flusher) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *flusher) loop() {
	defer close(f.stopped)
	t := time.NewTicker(f.sh.m.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-f.kick:
			f.lj.mu.Lock()
			quiet := f.lj.job.quiet
			f.lj.mu.Unlock()
			if quiet {
				continue // nobody follows it yet: the tick is soon enough
			}
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		wrote, err := f.flush(ctx)
		cancel()
		if err != nil {
			if errors.Is(err, errFenced) {
				f.sh.m.fence(f.lj, "output flush")
				return
			}
			f.sh.m.log.Debug("flushing job output", "job", f.lj.job.ID, "err", err)
		}
		if !wrote {
			continue // nothing was new: the next line goes out at once
		}
		select {
		case <-f.stop:
			return
		case <-time.After(flushCoalesce):
		}
	}
}

// outputTail is output to append to the store and the flushed sizes after it.
type outputTail struct {
	parts []flushPart
	sizes [2]int64
}

// flush writes what the logs hold beyond what was flushed, and says
// whether there was anything.
func (f *flusher) flush(ctx context.Context) (bool, error) {
	f.lj.mu.Lock()
	finished := f.lj.finished
	f.lj.mu.Unlock()
	if finished {
		return false, nil // the final write carries the rest (finishFlush)
	}
	t, j, err := f.pending()
	if err != nil || t == nil {
		return false, err
	}
	if err := f.sh.st.flush(ctx, j.ID, j.epoch, t.parts, t.sizes[0], t.sizes[1], j); err != nil {
		return false, err
	}
	f.flushed = t.sizes
	return true, nil
}

// pending reads what the logs hold beyond what was flushed (nil: nothing).
func (f *flusher) pending() (*outputTail, Job, error) {
	lj := f.lj
	lj.mu.Lock()
	var sizes [2]int64
	if lj.stdout != nil {
		sizes[0] = lj.stdout.written
	}
	if lj.stderr != nil {
		sizes[1] = lj.stderr.written
	}
	j := lj.job
	lj.mu.Unlock()
	if sizes == f.flushed {
		return nil, j, nil
	}
	dir := jobDir(f.sh.m.cfg.StateDir, j.ID)
	var parts []flushPart
	for i, name := range []string{stdoutLogName, stderrLogName} {
		if sizes[i] <= f.flushed[i] {
			continue
		}
		data, err := readRange(filepath.Join(dir, name), f.flushed[i], sizes[i]-f.flushed[i])
		if err != nil {
			return nil, j, err
		}
		for off := int64(0); off < int64(len(data)); off += maxChunkRow {
			end := min(off+maxChunkRow, int64(len(data)))
			parts = append(parts, flushPart{stream: int16(i + 1), off: f.flushed[i] + off, data: data[off:end]})
		}
	}
	return &outputTail{parts: parts, sizes: sizes}, j, nil
}

func readRange(path string, off, n int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	defer fh.Close()
	buf := make([]byte, n)
	got, err := fh.ReadAt(buf, off)
	if int64(got) < n {
		return nil, fmt.Errorf("read log: %d of %d bytes: %w", got, n, err)
	}
	return buf, nil
}

// finishFlush stops a job's flusher and hands the output it has not
// flushed to the final update, which writes both in one statement (and is
// retried while the database is unreachable).
func (sh *shared) finishFlush(lj *liveJob) {
	lj.mu.Lock()
	f := lj.flusher
	lj.mu.Unlock()
	if f == nil {
		return
	}
	close(f.stop)
	<-f.stopped
	t, _, err := f.pending()
	if err != nil {
		sh.m.log.Error("reading the last output of a job", "job", lj.job.ID, "err", err)
		return
	}
	lj.mu.Lock()
	lj.job.tail = t
	lj.mu.Unlock()
}

// recentKeep is how long the replica that ran a background job answers
// reads of it (status, output) from memory once it ended, instead of from
// the store: a client following a job asks for its state and last output
// right after the end, and the store holds the same final state (written
// before the job left the live map). A job deleted here (prune, a sync
// run's forget) leaves at once; one pruned on another replica is seen
// gone here at most this late.
const recentKeep = 5 * time.Second

// recentJob is what reads of a recently ended job need: no result, no
// log writers, so thousands of them cost little.
type recentJob struct {
	job            Job // with its redacted request
	stdout, stderr logState
	until          time.Time
}

func (r recentJob) outputState() outputState {
	return outputState{status: r.job.Status, final: true, stdout: r.stdout, stderr: r.stderr}
}

// recentJob returns a background job that ended here within recentKeep.
func (sh *shared) recentJob(id string) (recentJob, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r, ok := sh.recent[id]
	if ok && time.Now().After(r.until) {
		delete(sh.recent, id)
		return recentJob{}, false
	}
	return r, ok
}

func (sh *shared) forgetRecent(ids ...string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, id := range ids {
		delete(sh.recent, id)
	}
}

// rememberRecent keeps a background job whose final state this node wrote.
func (sh *shared) rememberRecent(lj *liveJob) {
	lj.mu.Lock()
	keep := lj.claimed && !lj.fenced && !lj.inMemory && lj.job.Status.Terminal()
	var r recentJob
	if keep {
		r.job = lj.job
		if lj.stdout != nil {
			r.stdout = lj.stdout.state()
		}
		if lj.stderr != nil {
			r.stderr = lj.stderr.state()
		}
	}
	lj.mu.Unlock()
	if !keep || sh.m.lookupUnsaved(r.job.ID) != nil { // not saved: lookup has it
		return
	}
	r.job = lj.snapshot(true) // the request redacted, as the store has it
	r.job.tail = nil
	now := time.Now()
	r.until = now.Add(recentKeep)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now.Sub(sh.recentSwept) > recentKeep {
		for id, old := range sh.recent {
			if now.After(old.until) {
				delete(sh.recent, id)
			}
		}
		sh.recentSwept = now
	}
	sh.recent[r.job.ID] = r
}

// afterFinal runs once a job's final state is in the store: its local logs
// are a spool only (every replica reads the store), so they go after a
// minute, when no reader of the live job can still hold them.
func (sh *shared) afterFinal(lj *liveJob) {
	if res := lj.result; res != nil && (res.ExecutionStrategy == "uv-env" || res.ExecutionStrategy == "uv-project") {
		sh.rememberEnv(envKey(lj.req))
	}
	sh.rememberRecent(lj)
	dir := jobDir(sh.m.cfg.StateDir, lj.job.ID)
	time.AfterFunc(time.Minute, func() { os.RemoveAll(dir) })
}

// outputState is a job's output as the store has it: a job of another
// node, or a finished one.
func (sh *shared) outputState(ctx context.Context, id string) (outputState, error) {
	wake := sh.waiter(id)
	j, sr, err := sh.st.getShared(ctx, id)
	if err != nil {
		return outputState{}, err
	}
	st := outputState{
		status:  j.Status,
		final:   j.Status.Terminal(),
		stdout:  logState{size: sr.stdoutFlushed, truncated: j.StdoutTruncated},
		stderr:  logState{size: sr.stderrFlushed, truncated: j.StderrTruncated},
		changed: wake,
		poll:    foreignPoll,
	}
	st.read = func(stream engine.Stream, off, end int64, maxBytes int, final bool) (string, int64, error) {
		if off >= end {
			// A cursor past the flushed bytes (read from the owner before
			// it died) stays where it is: offsets never go backwards.
			return "", off, nil
		}
		want := min(end-off, int64(maxBytes)+utf8.UTFMax)
		s := int16(streamStdout)
		if stream == engine.Stderr {
			s = streamStderr
		}
		buf, err := sh.st.readOutput(ctx, id, s, off, want)
		if err != nil {
			return "", off, err
		}
		eof := final && off+int64(len(buf)) >= end
		cut := safeCut(buf, maxBytes, eof)
		return strings.ToValidUTF8(string(buf[:cut]), "\uFFFD"), off + int64(cut), nil
	}
	return st, nil
}

// cancelRemote cancels a job this node does not hold: at once when it is
// still queued, otherwise by asking its owner and waiting, up to ctx, for
// it to end.
func (sh *shared) cancelRemote(ctx context.Context, id string) (Job, error) {
	ok, err := sh.st.cancelQueued(ctx, id, time.Now().UTC())
	if err != nil {
		return Job{}, err
	}
	if ok {
		sh.note(changeNote{Job: id, Status: StatusCancelled, Done: true})
		sh.m.hub.publish(Event{JobID: id, Status: StatusCancelled, Done: true})
		return sh.st.get(ctx, id)
	}
	j, err := sh.st.get(ctx, id)
	if err != nil || j.Status.Terminal() {
		return j, err
	}
	if err := sh.st.requestCancel(ctx, id); err != nil {
		return j, err
	}
	sh.note(changeNote{Job: id, Cancel: true})
	for {
		wake := sh.waiter(id)
		j, err := sh.st.get(ctx, id)
		if err != nil || j.Status.Terminal() {
			return j, err
		}
		select {
		case <-wake:
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return j, fmt.Errorf("cancel job %s: its node is still stopping it: %w", id, ctx.Err())
		}
	}
}

// openSharedManager is Open for a shared (PostgreSQL) store: no state-dir
// owner lock (leases replace it), and the replica's loops started.
func openSharedManager(ctx context.Context, cfg Config, logger *slog.Logger) (*Manager, error) {
	if cfg.NodeLostAfter <= 0 {
		cfg.NodeLostAfter = DefaultNodeLostAfter
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	m := &Manager{
		cfg:       cfg,
		log:       logger.With("component", "jobs"),
		owner:     newID(),
		helperDir: filepath.Join(cfg.StateDir, "pylib"),
		hub:       newHub(cfg.NotifyInterval),
		live:      map[string]*liveJob{},
	}
	if err := openShared(ctx, cfg, m); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	if err := writeHelper(m.helperDir); err != nil {
		m.sh.close()
		return nil, fmt.Errorf("jobs: %w", err)
	}
	m.baseCtx, m.stop = context.WithCancel(context.Background())
	m.sh.startLoops()
	return m, nil
}

// releaseOwnership gives up what marks this Manager alive: the state-dir
// lock, or (shared store) the database it opened.
func (m *Manager) releaseOwnership() error {
	if m.sh != nil {
		return m.sh.close()
	}
	return releaseOwnerLock(m.lockFile)
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// saved handles the outcome of writing a job's state to the shared store:
// others hear of it, a lost lease stops the run, and a final state is
// retried while the database is unreachable.
func (sh *shared) saved(lj *liveJob, j *Job, err error) error {
	deadline := time.Now().Add(finalRetry)
	for wait := 50 * time.Millisecond; err != nil && j.Status.Terminal() && !errors.Is(err, errFenced) && !errors.Is(err, ErrNotFound) && time.Now().Before(deadline); wait = min(2*wait, 2*time.Second) {
		time.Sleep(wait)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = sh.st.update(ctx, j)
		cancel()
	}
	switch {
	case err == nil:
		return nil // the update notified the other replicas
	case errors.Is(err, errFenced):
		sh.m.log.Warn("a job's state was not saved: its lease is lost (another node failed it as node_lost)", "job", j.ID)
		sh.m.fence(lj, "state update")
		return nil
	}
	return err
}

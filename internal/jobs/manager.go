package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/pgdb"
)

// RunOptions is what the Manager passes to a RunFunc besides the request.
type RunOptions struct {
	// Timeout is the run's time limit; 0 means none. It replaces the
	// request's own timeout and the server's maximum for synchronous runs:
	// jobs have their own limit (Config.JobTimeout).
	Timeout time.Duration

	// ProgressPipe is the write end of a pipe the script reports progress
	// on, or nil. The engine must hand it to Python as an inherited file
	// descriptor, add ProgressEnv(thatFD) to Python's environment, and put
	// HelperDir on PYTHONPATH. The Manager owns the file: the engine must
	// not close it; the child's copy goes away with the child.
	ProgressPipe *os.File

	// HelperDir is the directory holding pyexec_progress.py.
	HelperDir string
}

// ProgressEnv returns the KEY=VALUE entries that tell a script where to
// report progress when ProgressPipe is its descriptor fd: the number, and
// the pipe's inode so the helper can check that fd still is that pipe (a
// subprocess of the script inherits the variables but, with Python's default
// close_fds, not the descriptor; its fd 3 may be an unrelated file).
func (o RunOptions) ProgressEnv(fd int) []string {
	if o.ProgressPipe == nil {
		return nil
	}
	env := []string{fmt.Sprintf("%s=%d", ProgressFDEnv, fd)}
	if st, err := o.ProgressPipe.Stat(); err == nil {
		if ino, ok := inode(st); ok {
			env = append(env, fmt.Sprintf("%s=%d", ProgressInodeEnv, ino))
		}
	}
	return env
}

// RunFunc executes one request and reports its life through obs. It must
// stop the run (the whole process tree) when ctx is cancelled, honour
// opts.Timeout, and return partial output information on timeout or cancel.
// engine.Engine.Run plus the progress wiring described on RunOptions fits.
type RunFunc func(ctx context.Context, req engine.Request, opts RunOptions, obs engine.Observer) (engine.Result, error)

// Config configures a Manager. Zero values take the documented defaults.
type Config struct {
	// StateDir holds jobs.db and jobs/<id>/{stdout,stderr}.log. Required.
	StateDir string
	// Run executes requests. Required.
	Run RunFunc
	// Validate, when set, checks a request before a job is created, so a
	// malformed request is an immediate error rather than a failed job.
	Validate func(ctx context.Context, req engine.Request) error

	// MaxConcurrent runs at once; default twice the number of cores.
	MaxConcurrent int
	// MaxQueue pending jobs at most; Start returns ErrBusy past it. Default 100.
	MaxQueue int
	// JobTimeout limits each job: 0 means DefaultJobTimeout, negative means
	// no limit. A request's own timeout, when set, is used if shorter.
	JobTimeout time.Duration
	// LogCap is the byte budget of one job's output logs, stdout and stderr
	// together; default DefaultLogCap.
	LogCap int64

	// ProgressSaveInterval throttles progress writes to the database
	// (default 1 s); subscribers still see every coalesced update.
	ProgressSaveInterval time.Duration
	// NotifyInterval is the minimum time between two deliveries to one
	// subscriber (default 250 ms: at most 4 per second).
	NotifyInterval time.Duration

	// StoreURL chooses the store: "" keeps jobs in SQLite under StateDir
	// (one node); a postgres:// URL shares them with every replica on that
	// database (see shared.go). DB, when set, is such a database already
	// open (StoreURL is then ignored).
	StoreURL string
	DB       *pgdb.DB
	// NodeID is this replica's id in a shared store (default: random).
	NodeID string
	// NodeLostAfter is how long a replica may stay silent before its
	// unfinished jobs are failed as node_lost (default 15 s).
	NodeLostAfter time.Duration
	// FlushInterval is the longest a running job's new output waits before
	// it is flushed to a shared store (default 250 ms; it usually goes
	// within flushCoalesce of being printed).
	FlushInterval time.Duration

	Logger *slog.Logger
}

// DefaultJobTimeout is the default time limit of a job.
const DefaultJobTimeout = time.Hour

// backstopGrace is how long after its timeout a run may take to return
// before the Manager cancels its context itself. The engine enforces the
// timeout (with the [TIMEOUT] note and a kill of the tree); this only guards
// against a RunFunc that ignores it.
const backstopGrace = 30 * time.Second

// Manager owns the jobs of one state directory: the queue, the running jobs,
// their logs and the store. It is safe for concurrent use. Only one Manager
// Several Managers (processes) may share a state directory: each only
// runs, cancels and recovers its own jobs (see owner.go) and reads the
// others' from the store and logs.
type Manager struct {
	cfg       Config
	log       *slog.Logger
	store     jobStore
	sh        *shared  // set on a shared (PostgreSQL) store
	owner     string   // this Manager's id, stamped on its jobs
	lockFile  *os.File // flock held while alive (see owner.go)
	helperDir string
	hub       *hub

	baseCtx context.Context // cancelled by Close: kills running jobs
	stop    context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	live    map[string]*liveJob // pending and running jobs
	unsaved map[string]*liveJob // finished jobs whose final state the store refused (storage.go)
	queue   []*liveJob          // pending jobs in arrival order
	running int

	// onWait, when set (tests only), is called when Output is about to block.
	onWait func()
}

// Open opens the state directory's job store, fails the jobs a previous
// process left unfinished (their logs stay readable), writes the progress
// helper module and starts accepting jobs.
func Open(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("jobs: Config.StateDir is required")
	}
	if cfg.Run == nil {
		return nil, errors.New("jobs: Config.Run is required")
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 2 * runtime.NumCPU()
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 100
	}
	if cfg.JobTimeout == 0 {
		cfg.JobTimeout = DefaultJobTimeout
	}
	if cfg.LogCap <= 0 {
		cfg.LogCap = DefaultLogCap
	}
	if cfg.ProgressSaveInterval <= 0 {
		cfg.ProgressSaveInterval = time.Second
	}
	if cfg.NotifyInterval <= 0 {
		cfg.NotifyInterval = 250 * time.Millisecond
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "jobs"), 0o700); err != nil {
		return nil, fmt.Errorf("jobs: create state dir: %w", err)
	}
	if cfg.DB != nil || pgdb.IsURL(cfg.StoreURL) {
		return openSharedManager(ctx, cfg, logger)
	}
	owner := newID()
	lock, err := takeOwnerLock(cfg.StateDir, owner)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, filepath.Join(cfg.StateDir, "jobs.db"))
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("jobs: %w", err)
	}
	m := &Manager{
		cfg:       cfg,
		log:       logger.With("component", "jobs"),
		store:     st,
		owner:     owner,
		lockFile:  lock,
		helperDir: filepath.Join(cfg.StateDir, "pylib"),
		hub:       newHub(cfg.NotifyInterval),
		live:      map[string]*liveJob{},
		unsaved:   map[string]*liveJob{},
	}
	if err := m.recoverOrphans(ctx); err != nil {
		st.close()
		releaseOwnerLock(lock)
		return nil, fmt.Errorf("jobs: %w", err)
	}
	if err := writeHelper(m.helperDir); err != nil {
		st.close()
		releaseOwnerLock(lock)
		return nil, fmt.Errorf("jobs: %w", err)
	}
	m.baseCtx, m.stop = context.WithCancel(context.Background())
	m.wg.Add(2)
	go m.sweepOrphans()
	go m.retryUnsaved()
	return m, nil
}

// Limits reports the limits jobs are held to (defaults filled in): the
// job time limit (0: none), concurrent runs and queued jobs.
func (m *Manager) Limits() (jobTimeout time.Duration, maxConcurrent, maxQueue int) {
	return max(m.cfg.JobTimeout, 0), m.cfg.MaxConcurrent, m.cfg.MaxQueue
}

// HelperDir is the directory holding the pyexec_progress module; runs that
// should be able to report progress need it on PYTHONPATH.
func (m *Manager) HelperDir() string { return m.helperDir }

// Close stops accepting jobs, kills running ones (they end failed with
// MsgShutdown), fails pending ones, waits for them up to ctx, and closes the
// store.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	pending := m.queue
	m.queue = nil
	for _, lj := range pending {
		delete(m.live, lj.job.ID)
	}
	m.mu.Unlock()
	for _, lj := range pending {
		if lj.claimed { // another replica may run it
			m.sh.release(lj)
			continue
		}
		m.finishUnstarted(lj, StatusFailed, MsgShutdown)
	}
	m.stop()
	waited := make(chan struct{})
	go func() { m.wg.Wait(); close(waited) }()
	var err error
	select {
	case <-waited:
	case <-ctx.Done():
		err = fmt.Errorf("jobs: close: running jobs did not stop in time: %w", ctx.Err())
	}
	m.hub.closeAll()
	return errors.Join(err, m.store.close(), m.releaseOwnership())
}

func newID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand panics instead on broken systems)
	return hex.EncodeToString(b[:])
}

// timeoutFor is the limit of a job running req.
func (m *Manager) timeoutFor(req engine.Request) time.Duration {
	limit := m.cfg.JobTimeout
	if limit < 0 {
		limit = 0
	}
	if req.Timeout > 0 {
		// Capped before it is converted: 1e300 seconds is the job limit
		// (or, with none, the longest Duration), never a wrapped value.
		return engine.SecondsUpTo(req.Timeout, limit)
	}
	return limit
}

// Start queues req as a new job and returns it (pending, or running when a
// slot was free). It returns ErrBusy when MaxQueue jobs are already waiting.
func (m *Manager) Start(ctx context.Context, req engine.Request, label string) (Job, error) {
	lj, err := m.start(ctx, req, label, true, nil, nil)
	if err != nil {
		return Job{}, err
	}
	return lj.snapshot(true), nil
}

// StartRun queues a job that run executes instead of Config.Run, on this
// replica: work bound to this process (a session's cell). req describes
// it (code, timeout) for get_job and list_jobs. Such a job is never run
// again elsewhere: if this process dies, recovery fails it like any other.
func (m *Manager) StartRun(ctx context.Context, req engine.Request, label string, run RunFunc) (Job, error) {
	lj, err := m.start(ctx, req, label, false, nil, run)
	if err != nil {
		return Job{}, err
	}
	return lj.snapshot(true), nil
}

// start creates a job. anyNode lets a shared store's queue give it to any
// replica; otherwise (synchronous runs) it runs here. With lazy set (only
// for a job that runs here) it stays in memory until it must be kept
// (spill.go). run, when set, executes it instead of Config.Run.
func (m *Manager) start(ctx context.Context, req engine.Request, label string, anyNode bool, lazy *lazyOptions, run RunFunc) (*liveJob, error) {
	if m.cfg.Validate != nil {
		if err := m.cfg.Validate(ctx, req); err != nil {
			return nil, err
		}
	}
	timeout := m.timeoutFor(req)
	reqCopy := req
	lj := &liveJob{
		m:       m,
		req:     req,
		run:     run,
		timeout: timeout,
		changed: make(chan struct{}),
		done:    make(chan struct{}),
		job: Job{
			ID:             newID(),
			Label:          label,
			Status:         StatusPending,
			CreatedAt:      time.Now().UTC(),
			TimeoutSeconds: timeout.Seconds(),
			Request:        &reqCopy,
		},
	}
	lj.job.quiet = m.sh != nil && !anyNode
	if m.sh != nil && anyNode {
		if m.isClosed() {
			return nil, ErrClosed
		}
		if err := m.sh.enqueue(ctx, lj); err != nil {
			return nil, err
		}
		m.hub.publish(Event{JobID: lj.job.ID, Status: StatusPending})
		return lj, nil
	}
	// The insert happens under m.mu so that queue order, creation order and
	// the busy check agree even when many Starts race.
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if len(m.queue) >= m.cfg.MaxQueue {
		return nil, fmt.Errorf("%w (%d pending, %d running; limits: --max-queue %d, --max-concurrent %d)",
			ErrBusy, len(m.queue), m.running, m.cfg.MaxQueue, m.cfg.MaxConcurrent)
	}
	if lazy != nil {
		lj.lazy, lj.inMemory = *lazy, true
	} else if err := m.store.insert(ctx, &lj.job, m.owner); err != nil {
		if IsStorageFull(err) {
			return nil, m.stateFull("cannot record a new job", err)
		}
		return nil, fmt.Errorf("jobs: start: %w", err)
	}
	m.live[lj.job.ID] = lj
	m.queue = append(m.queue, lj)
	m.dispatchLocked()
	m.hub.publish(Event{JobID: lj.job.ID, Status: StatusPending})
	return lj, nil
}

// Get returns a job's current metadata, including its (redacted) request.
func (m *Manager) Get(ctx context.Context, id string) (Job, error) {
	if lj := m.lookup(id); lj != nil {
		lj.settle(ctx)
		return lj.snapshot(true), nil
	}
	if m.sh != nil {
		if r, ok := m.sh.recentJob(id); ok {
			return r.job, nil
		}
	}
	return m.store.get(ctx, id)
}

// lookup returns the in-memory state of a job: pending, running, or
// finished but not saved yet.
func (m *Manager) lookup(id string) *liveJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	if lj := m.live[id]; lj != nil {
		return lj
	}
	return m.unsaved[id]
}

// List returns jobs matching f, newest first, and the total before the limit.
// Pending and running jobs show their live state (output sizes, progress).
func (m *Manager) List(ctx context.Context, f Filter) (JobList, error) {
	if f.Status != "" && !f.Status.Valid() {
		return JobList{}, &engine.RequestError{Field: "status", Message: fmt.Sprintf("%q is not a job status; use pending, running, completed, failed or cancelled", f.Status)}
	}
	out, err := m.store.list(ctx, f)
	if err != nil {
		return JobList{}, err
	}
	for i := range out.Jobs {
		if lj := m.lookup(out.Jobs[i].ID); lj != nil {
			out.Jobs[i] = lj.snapshot(f.IncludeRequest)
		}
	}
	if f.Status != "" {
		// A job finished but not saved yet is still "running" in the
		// store: it is listed under its real status.
		kept := out.Jobs[:0]
		for _, j := range out.Jobs {
			if j.Status == f.Status {
				kept = append(kept, j)
			} else {
				out.Total--
			}
		}
		out.Jobs = kept
	}
	return out, nil
}

// Cancel stops a job: a pending one leaves the queue, a running one has its
// context cancelled (the engine kills the whole process tree) and Cancel
// waits, up to ctx, until it has stopped. The output stays readable. A
// finished job is returned unchanged.
func (m *Manager) Cancel(ctx context.Context, id string) (Job, error) {
	m.mu.Lock()
	lj := m.live[id]
	if lj == nil {
		done := m.unsaved[id]
		m.mu.Unlock()
		if done != nil { // finished; its final state is only in memory
			return done.snapshot(true), nil
		}
		if m.sh != nil {
			return m.sh.cancelRemote(ctx, id)
		}
		j, err := m.store.get(ctx, id)
		if err == nil && !j.Status.Terminal() {
			return j, fmt.Errorf("%w: job %s is %s in another pyexec process sharing this state dir; cancel it through that server", ErrForeign, id, j.Status)
		}
		return j, err
	}
	if !lj.dequeued {
		for i, q := range m.queue {
			if q == lj {
				m.queue = append(m.queue[:i], m.queue[i+1:]...)
				break
			}
		}
		delete(m.live, id)
		m.mu.Unlock()
		m.finishUnstarted(lj, StatusCancelled, MsgCancelled)
		return lj.snapshot(true), nil
	}
	m.mu.Unlock()

	lj.mu.Lock()
	lj.cancelRequested = true
	cancel := lj.cancel
	lj.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	select {
	case <-lj.done:
	case <-ctx.Done():
		return lj.snapshot(true), fmt.Errorf("cancel job %s: still stopping: %w", id, ctx.Err())
	}
	return lj.snapshot(true), nil
}

// Prune removes finished jobs selected by opts, rows and log directories.
// Pending and running jobs are never removed.
func (m *Manager) Prune(ctx context.Context, opts PruneOptions) (PruneResult, error) {
	if math.IsNaN(opts.MaxAgeHours) || math.IsInf(opts.MaxAgeHours, 0) || opts.MaxAgeHours < 0 {
		return PruneResult{}, &engine.RequestError{Field: "max_age_hours", Message: fmt.Sprintf("must be a finite number of hours >= 0, got %v", opts.MaxAgeHours)}
	}
	ids, err := m.store.pruneCandidates(ctx, opts, time.Now())
	if err != nil {
		return PruneResult{}, err
	}
	m.mu.Lock()
	kept := ids[:0]
	for _, id := range ids {
		if m.live[id] == nil { // a job finishing right now stays until next time
			kept = append(kept, id)
		}
	}
	m.mu.Unlock()
	if m.sh != nil {
		m.sh.forgetRecent(kept...)
	}
	removed, err := m.store.deleteFinished(ctx, kept)
	if err != nil {
		return PruneResult{Removed: removed}, err
	}
	var rmErr error
	for _, id := range kept {
		if err := os.RemoveAll(jobDir(m.cfg.StateDir, id)); err != nil {
			rmErr = errors.Join(rmErr, fmt.Errorf("remove logs of job %s: %w", id, err))
		}
	}
	remaining, err := m.store.count(ctx)
	return PruneResult{Removed: removed, Remaining: remaining}, errors.Join(rmErr, err)
}

package executor

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/jobs"
)

// JobExecutor is an Executor that also runs background jobs. Front ends
// check for it with a type assertion; an executor without it serves only
// synchronous runs.
type JobExecutor interface {
	Executor
	// RunOrHandoff runs req synchronously for up to opts.Budget; if it is
	// still running then, it continues as a background job and the Outcome
	// carries the job and the output so far. Cancelling ctx before the
	// handoff kills the run.
	RunOrHandoff(ctx context.Context, req engine.Request, opts SyncOptions, progress ProgressFunc) (Outcome, error)
	// Start queues req as a background job.
	Start(ctx context.Context, req engine.Request, label string) (jobs.Job, error)
	Job(ctx context.Context, id string) (jobs.Job, error)
	// Output reads a job's output after the cursor's byte offsets.
	Output(ctx context.Context, id string, c jobs.Cursor) (jobs.Chunk, error)
	Cancel(ctx context.Context, id string) (jobs.Job, error)
	Jobs(ctx context.Context, f jobs.Filter) (jobs.JobList, error)
	Prune(ctx context.Context, opts jobs.PruneOptions) (jobs.PruneResult, error)
	// Subscribe streams coalesced change events of one job ("" for all).
	Subscribe(ctx context.Context, id string) (<-chan jobs.Event, func(), error)
}

// SyncOptions tune RunOrHandoff.
type SyncOptions struct {
	Budget time.Duration // <= 0: no handoff
	Label  string        // label of the job if the run is handed off
	// OutputBudget is the characters of output the caller will show (see
	// package present). A run that finishes with more (or with images that
	// cannot all go inline) is kept as a job so its full output stays
	// readable; one with less leaves nothing behind. 0: present's default.
	OutputBudget int
	// Keep keeps the backing job after a run that ended within the budget
	// (normally removed: only handed-off runs appear in list_jobs). An MCP
	// task's run keeps its job, so get_job and list_jobs see it.
	Keep bool
	// OnJob, when set, hears the backing job once it exists (executors
	// whose synchronous runs have one).
	OnJob func(jobs.Job)
}

// Outcome is a synchronous run's result, or the job it became.
type Outcome struct {
	Result *engine.Result // set when the run finished within the budget
	Job    jobs.Job       // the backing job (on handoff: running or pending)
	Output *jobs.Chunk    // on handoff: output so far and cursors to continue
	// Kept is true when a finished run was kept as a job (its output did
	// not fit OutputBudget): Job.ID names its full output.
	Kept bool
}

// LocalJobs is Local plus a job manager on the same engine.
type LocalJobs struct {
	*Local
	m *jobs.Manager
}

var _ JobExecutor = (*LocalJobs)(nil)

// OpenLocalJobs opens the job store in cfg.StateDir and runs jobs through
// l's engine. cfg.Run is set here. Close it to stop running jobs.
func OpenLocalJobs(ctx context.Context, l *Local, cfg jobs.Config) (*LocalJobs, error) {
	cfg.Run = l.runJob
	if cfg.Validate == nil {
		cfg.Validate = l.eng.Validate
	}
	m, err := jobs.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Sessions are recorded in the job store: the restart record, and on
	// a shared store the replica set's names.
	l.sessions.mu.Lock()
	l.sessions.cfg.Store, l.sessions.cfg.Owner, l.sessions.cfg.Cluster = m.SessionStore(), m.NodeID(), m.Shared()
	if l.sessions.cfg.Logger == nil {
		l.sessions.cfg.Logger = cfg.Logger
	}
	l.sessions.mu.Unlock()
	return &LocalJobs{Local: l, m: m}, nil
}

// Manager exposes the job manager.
func (l *LocalJobs) Manager() *jobs.Manager { return l.m }

// Close kills running jobs (they are recorded as failed) and closes the store.
func (l *LocalJobs) Close(ctx context.Context) error { return l.m.Close(ctx) }

// noLimit stands for "no timeout" in the engine, which always arms a timer.
const noLimit = 100 * 365 * 24 * time.Hour

// runJob is the jobs.RunFunc: the engine with the job's own time limit and
// the progress channel (an inherited fd 3 named by PYEXEC_PROGRESS_FD, and
// the helper module on PYTHONPATH).
func (l *Local) runJob(ctx context.Context, req engine.Request, o jobs.RunOptions, obs engine.Observer) (engine.Result, error) {
	x := engine.Extras{Timeout: o.Timeout}
	if x.Timeout <= 0 {
		x.Timeout = noLimit
	}
	if o.HelperDir != "" {
		x.PythonPath = []string{o.HelperDir}
	}
	if o.ProgressPipe != nil {
		x.ExtraFiles = []*os.File{o.ProgressPipe}
		x.Env = o.ProgressEnv(3)
	}
	return l.eng.RunWith(ctx, req, obs, x)
}

// RunOrHandoff implements JobExecutor. Heartbeats go to progress every
// beat, and at once when the script reports progress.
func (l *LocalJobs) RunOrHandoff(ctx context.Context, req engine.Request, opts SyncOptions, progress ProgressFunc) (Outcome, error) {
	hb := &jobHeartbeat{m: l.m, progress: progress, start: time.Now()}
	so := jobs.SyncOptions{Label: opts.Label, Budget: opts.Budget, Ephemeral: !opts.Keep, OnStart: opts.OnJob}
	if so.Ephemeral {
		keepFor(&so, opts.OutputBudget)
	}
	if progress != nil {
		so.OnStart = func(j jobs.Job) {
			if opts.OnJob != nil {
				opts.OnJob(j)
			}
			hb.begin(j)
		}
		so.OnEvent = func(ev jobs.Event) {
			if ev.Progress != nil {
				hb.beat(ctx)
			}
		}
		defer hb.stop()
	}
	out, err := l.m.RunSync(ctx, req, so)
	o := Outcome{Result: out.Result, Job: out.Job, Output: out.Output, Kept: out.Kept || opts.Keep}
	if o.Kept && o.Result != nil {
		o.Result.OutputJobID = o.Job.ID
	}
	return o, err
}

// jobHeartbeat reports a job-backed synchronous run's progress.
type jobHeartbeat struct {
	m        *jobs.Manager
	progress ProgressFunc
	start    time.Time

	mu   sync.Mutex // serialises beats so elapsed time never goes backwards
	id   string
	quit chan struct{}
	wg   sync.WaitGroup
}

func (h *jobHeartbeat) begin(j jobs.Job) {
	h.mu.Lock()
	h.id = j.ID
	h.quit = make(chan struct{})
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-h.quit:
				return
			case <-t.C:
				h.beat(context.Background())
			}
		}
	}()
}

func (h *jobHeartbeat) beat(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.id == "" {
		return
	}
	j, err := h.m.Get(ctx, h.id)
	if err != nil {
		return
	}
	p := Progress{ElapsedSeconds: time.Since(h.start).Seconds(), StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes}
	p.Message = fmt.Sprintf("running %.1fs, %d B stdout, %d B stderr", p.ElapsedSeconds, p.StdoutBytes, p.StderrBytes)
	if j.Phase != "" {
		p.Message = fmt.Sprintf("%.1fs, building the Python environment: %s", p.ElapsedSeconds, j.Phase)
	}
	if sp := j.Progress; sp != nil {
		p.Message = ScriptProgressText(sp) + " · " + p.Message
	}
	h.progress(p)
}

func (h *jobHeartbeat) stop() {
	h.mu.Lock()
	q := h.quit
	h.mu.Unlock()
	if q != nil {
		close(q)
		h.wg.Wait()
	}
}

// ScriptProgressText renders a script's progress report: "5/10 (50%): msg".
func ScriptProgressText(p *jobs.Progress) string {
	s := fmt.Sprintf("%g", p.Current)
	if p.Total > 0 {
		s += fmt.Sprintf("/%g (%.0f%%)", p.Total, 100*p.Current/p.Total)
	}
	if p.Message != "" {
		s += ": " + p.Message
	}
	return s
}

// Info implements Executor, adding the job limits.
func (l *LocalJobs) Info(ctx context.Context) (Info, error) {
	info, err := l.Local.Info(ctx)
	if err != nil {
		return Info{}, err
	}
	timeout, conc, queue := l.m.Limits()
	info.Limits.JobTimeoutSeconds = timeout.Seconds()
	info.Limits.MaxConcurrent, info.Limits.MaxQueue = conc, queue
	return info.withStory(), nil
}

// Start implements JobExecutor.
func (l *LocalJobs) Start(ctx context.Context, req engine.Request, label string) (jobs.Job, error) {
	return l.m.Start(ctx, req, label)
}

// Job implements JobExecutor.
func (l *LocalJobs) Job(ctx context.Context, id string) (jobs.Job, error) { return l.m.Get(ctx, id) }

// Output implements JobExecutor.
func (l *LocalJobs) Output(ctx context.Context, id string, c jobs.Cursor) (jobs.Chunk, error) {
	return l.m.Output(ctx, id, c)
}

// Cancel implements JobExecutor.
func (l *LocalJobs) Cancel(ctx context.Context, id string) (jobs.Job, error) {
	return l.m.Cancel(ctx, id)
}

// Jobs implements JobExecutor.
func (l *LocalJobs) Jobs(ctx context.Context, f jobs.Filter) (jobs.JobList, error) {
	return l.m.List(ctx, f)
}

// Prune implements JobExecutor.
func (l *LocalJobs) Prune(ctx context.Context, opts jobs.PruneOptions) (jobs.PruneResult, error) {
	return l.m.Prune(ctx, opts)
}

// Subscribe implements JobExecutor.
func (l *LocalJobs) Subscribe(ctx context.Context, id string) (<-chan jobs.Event, func(), error) {
	return l.m.Subscribe(ctx, id)
}

// JobArtifacts is implemented by job executors that keep what a job's run
// displayed (jobs.Artifact): the local one, and a remote one over REST.
type JobArtifacts interface {
	// Artifact returns a stored artifact's bytes and media type.
	Artifact(ctx context.Context, id, name string) ([]byte, string, error)
}

// Artifact implements JobArtifacts.
func (l *LocalJobs) Artifact(ctx context.Context, id, name string) ([]byte, string, error) {
	return l.m.Artifact(ctx, id, name)
}

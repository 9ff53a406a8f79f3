package executor

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// heartbeat is how often progress is reported while a call runs: well
// inside the one-second promise made to MCP clients.
const heartbeat = 500 * time.Millisecond

// Local runs requests in this process through the engine.
type Local struct {
	eng        *engine.Engine
	version    string
	maxWorkers int

	uvOnce    sync.Once
	uvVersion string

	quality   qualityRunner // format and lint (quality.go)
	maxUpload int64         // largest file WriteFile accepts (files.go)

	sessions localSessions // live Python sessions (sessions.go)
}

// NewLocal wraps eng. maxWorkers caps batch parallelism (0: the core count).
func NewLocal(eng *engine.Engine, version string, maxWorkers int) *Local {
	if maxWorkers <= 0 {
		maxWorkers = runtime.NumCPU()
	}
	return &Local{eng: eng, version: version, maxWorkers: maxWorkers}
}

// Prime starts, in the background, what the first Info would otherwise
// wait for: interpreter discovery and uv's version. Servers call it once at
// start.
func (l *Local) Prime() {
	l.eng.DiscoverInterpreters()
	go l.uv(context.Background())
}

// Engine exposes the engine for front ends that need more than the seam.
func (l *Local) Engine() *engine.Engine { return l.eng }

// Run implements Executor.
func (l *Local) Run(ctx context.Context, req engine.Request, progress ProgressFunc) (engine.Result, error) {
	var c counter
	stop := c.heartbeat(progress, nil)
	defer stop()
	return l.eng.Run(ctx, req, &c)
}

// Batch implements Executor.
func (l *Local) Batch(ctx context.Context, req BatchRequest, progress ProgressFunc) (BatchResult, error) {
	n := len(req.Requests)
	if n == 0 {
		return BatchResult{}, &engine.RequestError{Field: "codes", Message: "the batch is empty; give at least one snippet"}
	}
	if n > MaxBatch {
		return BatchResult{}, &engine.RequestError{Field: "codes", Message: fmt.Sprintf("the batch has %d snippets; the limit is %d", n, MaxBatch)}
	}
	if req.MaxWorkers < 0 {
		return BatchResult{}, &engine.RequestError{Field: "max_workers", Message: "must be positive"}
	}
	workers := req.MaxWorkers
	if workers == 0 {
		workers = runtime.NumCPU()
	}
	workers = min(workers, l.maxWorkers, n)

	var c counter
	var done atomic.Int64
	stop := c.heartbeat(progress, func(p *Progress) {
		p.Done, p.Total = int(done.Load()), n
		p.Message = fmt.Sprintf("%d/%d snippets done, %s", p.Done, n, p.Message)
	})
	defer stop()

	out := BatchResult{Results: make([]BatchItem, n)}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i, r := range req.Requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := l.eng.Run(ctx, r, &c)
			item := BatchItem{Result: res, Index: i}
			if err != nil {
				item.Error = err.Error()
			}
			item.Finish()
			out.Results[i] = item
			done.Add(1)
		}()
	}
	wg.Wait()
	return out, nil
}

// Info implements Executor.
func (l *Local) Info(ctx context.Context) (Info, error) {
	cfg := l.eng.Config()
	def, err := l.eng.DefaultInterpreter(ctx)
	if err != nil {
		return Info{}, err
	}
	tmpLimit, tmpNote := l.eng.TmpLimit()
	return Info{
		Version:            l.version,
		Workspace:          cfg.Workspace,
		StateDir:           cfg.StateDir,
		DefaultInterpreter: def,
		Interpreters:       l.eng.Interpreters(ctx),
		UV:                 l.uv(ctx),
		Limits: Limits{
			DefaultTimeoutSeconds: cfg.DefaultTimeout.Seconds(),
			MaxTimeoutSeconds:     cfg.MaxTimeout.Seconds(),
			MaxCodeBytes:          cfg.CodeLimit,
			MaxStdinBytes:         cfg.StdinLimit,
			MaxRequestBytes:       engine.WireLimit(cfg.CodeLimit),
			MaxBatchRequestBytes:  BatchWireLimit(cfg.CodeLimit),
			OutputCapBytes:        cfg.OutputCap,
			MaxBatch:              MaxBatch,
			MaxWorkers:            l.maxWorkers,
			TmpLimitBytes:         tmpLimit,
			TmpNote:               tmpNote,
		},
		Sandbox: SandboxInfo{
			Policy:       string(cfg.Sandbox.Policy),
			Network:      string(cfg.Sandbox.EffectiveNetwork()),
			RunAs:        cfg.RunAs,
			RunsAs:       l.eng.RunAsPreview(ctx),
			BestEffort:   cfg.Sandbox.BestEffort,
			Limits:       cfg.Sandbox.Limits,
			Capabilities: l.eng.Capabilities(),
		},
		Warm:     l.eng.WarmStatsIfOn(),
		Prestart: l.eng.PrestartStats(),
	}.withStory(), nil
}

// withStory fills in Limits.Timeouts from the numbers.
func (i Info) withStory() Info {
	i.Limits.Timeouts = TimeoutStory(i.Limits)
	return i
}

func (l *Local) uv(ctx context.Context) string {
	l.uvOnce.Do(func() {
		l.uvVersion = "not installed"
		// The uv that builds environments (found past pyenv shims).
		path, err := l.eng.Environments().UVPath()
		if err != nil || path == "" {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, path, "--version").Output()
		if err == nil {
			l.uvVersion = strings.TrimSpace(string(out))
		}
	})
	return l.uvVersion
}

// counter observes runs to feed progress heartbeats.
type counter struct {
	stdout, stderr atomic.Int64
	envStep        atomic.Pointer[string] // latest environment build step (Environment)
}

// Environment hears uv environment build steps (engine.EnvironmentObserver),
// so heartbeats say why a first run with dependencies takes seconds.
func (c *counter) Environment(phase, detail string) {
	step := phase
	if detail != "" {
		step += ": " + detail
	}
	c.envStep.Store(&step)
}

func (c *counter) Started(int) {}

func (c *counter) Output(s engine.Stream, p []byte) {
	if s == engine.Stdout {
		c.stdout.Add(int64(len(p)))
	} else {
		c.stderr.Add(int64(len(p)))
	}
}

// heartbeat reports progress every beat until the returned stop is called.
func (c *counter) heartbeat(progress ProgressFunc, decorate func(*Progress)) (stop func()) {
	if progress == nil {
		return func() {}
	}
	start := time.Now()
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				p := Progress{
					ElapsedSeconds: time.Since(start).Seconds(),
					StdoutBytes:    c.stdout.Load(),
					StderrBytes:    c.stderr.Load(),
				}
				p.Message = fmt.Sprintf("running %.1fs, %d B stdout, %d B stderr", p.ElapsedSeconds, p.StdoutBytes, p.StderrBytes)
				if step := c.envStep.Load(); step != nil && !strings.HasPrefix(*step, "done") {
					p.Message = fmt.Sprintf("%.1fs, building the Python environment: %s", p.ElapsedSeconds, *step)
				}
				if decorate != nil {
					decorate(&p)
				}
				progress(p)
			}
		}
	}()
	return func() { close(quit); <-finished }
}

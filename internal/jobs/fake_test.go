package jobs

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// fakeRunner is a RunFunc driven by the test through channels: each run
// announces itself on calls, then performs the steps it is sent until one
// ends it or its context is cancelled (as the engine would kill the tree).
type fakeRunner struct {
	calls chan *fakeCall
}

type fakeCall struct {
	ctx   context.Context
	req   engine.Request
	opts  RunOptions
	obs   engine.Observer
	steps chan fakeStep
	ended chan string // why the run returned: "exit" or "cancelled"
}

type fakeStep struct {
	stream   engine.Stream
	data     string
	progress string // raw line written to the progress pipe
	exit     *int
	err      error
	ack      chan struct{}
}

func newFake() *fakeRunner { return &fakeRunner{calls: make(chan *fakeCall)} }

func (f *fakeRunner) run(ctx context.Context, req engine.Request, opts RunOptions, obs engine.Observer) (engine.Result, error) {
	c := &fakeCall{ctx: ctx, req: req, opts: opts, obs: obs, steps: make(chan fakeStep), ended: make(chan string, 1)}
	obs.Started(4242)
	select {
	case f.calls <- c:
	case <-ctx.Done():
		c.ended <- "cancelled"
		return engine.Result{ExitCode: -15}, nil
	}
	for {
		select {
		case s := <-c.steps:
			if s.data != "" {
				obs.Output(s.stream, []byte(s.data))
			}
			if s.progress != "" {
				opts.ProgressPipe.Write([]byte(s.progress))
			}
			if s.err != nil {
				c.ended <- "error"
				close(s.ack)
				return engine.Result{}, s.err
			}
			if s.exit != nil {
				c.ended <- "exit"
				close(s.ack)
				return engine.Result{ExitCode: *s.exit, ElapsedSeconds: 0.5, ExecutionStrategy: "system-python"}, nil
			}
			close(s.ack)
		case <-ctx.Done():
			c.ended <- "cancelled"
			return engine.Result{ExitCode: -15}, nil
		}
	}
}

func (c *fakeCall) do(t *testing.T, s fakeStep) {
	t.Helper()
	s.ack = make(chan struct{})
	select {
	case c.steps <- s:
	case <-time.After(10 * time.Second):
		t.Fatal("fake run did not take the step")
	}
	<-s.ack
}

func (c *fakeCall) stdout(t *testing.T, s string) { c.do(t, fakeStep{stream: engine.Stdout, data: s}) }
func (c *fakeCall) stderr(t *testing.T, s string) { c.do(t, fakeStep{stream: engine.Stderr, data: s}) }
func (c *fakeCall) exit(t *testing.T, code int)   { c.do(t, fakeStep{exit: &code}) }

// next waits for the next run to start.
func (f *fakeRunner) next(t *testing.T) *fakeCall {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no run started")
		return nil
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openTest opens a Manager on a fresh state dir with a fake runner.
func openTest(t *testing.T, mod func(*Config)) (*Manager, *fakeRunner, Config) {
	t.Helper()
	f := newFake()
	cfg := Config{StateDir: t.TempDir(), Run: f.run, Logger: quietLogger(), NotifyInterval: time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	m, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m, f, cfg
}

func code(s string) engine.Request { return engine.Request{Code: s} }

// waitDone blocks until the job is final.
func waitDone(t *testing.T, m *Manager, id string) Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, unsub, err := m.Subscribe(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				j, err := m.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				return j
			}
		case <-ctx.Done():
			t.Fatal("job did not finish")
		}
	}
}

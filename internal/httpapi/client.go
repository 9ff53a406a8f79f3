package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
)

// Client defaults.
const (
	// DefaultTimeoutBuffer is added to a run's own timeout to get the HTTP
	// deadline (the seed's MCP_HTTP_TIMEOUT, default 10 s). It is also how
	// long a streamed call may go without a progress line before the client
	// gives up on the server.
	DefaultTimeoutBuffer  = 10 * time.Second
	DefaultConnectTimeout = 5 * time.Second
	// infoTimeout bounds GET /v1/info (see Client.Info).
	infoTimeout = 60 * time.Second
)

// ClientOptions configure a Client.
type ClientOptions struct {
	Token          string
	TimeoutBuffer  time.Duration
	ConnectTimeout time.Duration
	// Transport overrides the HTTP transport (tests).
	Transport http.RoundTripper
	// Header is sent with every request (a replica forwarding a call
	// marks it so).
	Header http.Header
}

// Client is an executor.Executor backed by a remote `pyexec serve`. Runs
// stream progress from the server (application/x-ndjson), so the caller's
// heartbeats keep flowing and a dead server is noticed within the buffer.
type Client struct {
	base string
	opts ClientOptions
	hc   *http.Client

	mu     sync.Mutex
	limits *executor.Limits

	autoOnce  sync.Once
	autoState // autosaves sent in the background (client_scripts.go)
}

var _ executor.Executor = (*Client)(nil)

// NewClient returns a client for the server at baseURL (http or https).
func NewClient(baseURL string, opts ClientOptions) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("execution server URL %q: want http://HOST:PORT or https://HOST:PORT", baseURL)
	}
	if opts.TimeoutBuffer <= 0 {
		opts.TimeoutBuffer = DefaultTimeoutBuffer
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	tr := opts.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = opts.ConnectTimeout
		t.MaxIdleConnsPerHost = 64
		t.Proxy = nil // an execution server is addressed directly
		tr = t
	}
	return &Client{base: u.String(), opts: opts, hc: &http.Client{Transport: tr}}, nil
}

// URL is the server's base URL.
func (c *Client) URL() string { return c.base }

// Run implements executor.Executor.
func (c *Client) Run(ctx context.Context, req engine.Request, progress executor.ProgressFunc) (engine.Result, error) {
	d, err := c.deadline(ctx, []engine.Request{req})
	if err != nil {
		return engine.Result{}, err
	}
	return call[engine.Result](ctx, c, "/v1/run", req, d, progress)
}

// Batch implements executor.Executor.
func (c *Client) Batch(ctx context.Context, req executor.BatchRequest, progress executor.ProgressFunc) (executor.BatchResult, error) {
	d, err := c.deadline(ctx, req.Requests)
	if err != nil {
		return executor.BatchResult{}, err
	}
	res, err := call[executor.BatchResult](ctx, c, "/v1/batch", req, d, progress)
	res.Finish()
	return res, err
}

// Info implements executor.Executor.
func (c *Client) Info(ctx context.Context) (executor.Info, error) {
	// A server's first /v1/info looks for every installed interpreter
	// (seconds on a busy machine): it gets longer than the silence a run
	// may keep. A server that is down still fails at once.
	ctx, cancel := context.WithTimeout(ctx, max(c.opts.TimeoutBuffer, infoTimeout))
	defer cancel()
	var info executor.Info
	if err := c.get(ctx, "/v1/info", &info); err != nil {
		return executor.Info{}, err
	}
	c.mu.Lock()
	c.limits = &info.Limits
	c.mu.Unlock()
	return info, nil
}

// Health checks the server's /health.
func (c *Client) Health(ctx context.Context) (Health, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.TimeoutBuffer)
	defer cancel()
	var h Health
	return h, c.get(ctx, "/health", &h)
}

// deadline is how long a call may take: the runs' own timeouts (the
// server's default and cap, learnt once from /v1/info) plus the buffer.
func (c *Client) deadline(ctx context.Context, reqs []engine.Request) (time.Duration, error) {
	c.mu.Lock()
	l := c.limits
	c.mu.Unlock()
	if l == nil {
		if _, err := c.Info(ctx); err != nil {
			return 0, err
		}
		c.mu.Lock()
		l = c.limits
		c.mu.Unlock()
	}
	var total float64
	for _, r := range reqs {
		t := r.Timeout
		if t <= 0 || math.IsNaN(t) {
			t = l.DefaultTimeoutSeconds
		}
		total += min(t, l.MaxTimeoutSeconds)
	}
	return engine.SecondsUpTo(total, 0) + c.opts.TimeoutBuffer, nil
}

func (c *Client) newRequest(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	for k, v := range c.opts.Header {
		req.Header[k] = v
	}
	return req, nil
}

func (c *Client) get(ctx context.Context, path string, v any) error {
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.transportError(ctx, err, false)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.statusError(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return c.transportError(ctx, err, true)
	}
	return nil
}

// errIdle is the cause when a streamed call went silent.
type errIdle struct {
	url string
	d   time.Duration
}

func (e *errIdle) Error() string {
	return fmt.Sprintf("execution server at %s sent nothing for %s during a run (it heartbeats every 0.5 s); giving up", e.url, e.d)
}

// call POSTs body and reads the streamed answer: progress lines, then the
// result or an error.
func call[T any](parent context.Context, c *Client, path string, body any, d time.Duration, progress executor.ProgressFunc) (T, error) {
	var zero T
	l, err := callLine[T](parent, c, path, body, d, progress)
	if err != nil {
		return zero, err
	}
	if l.Result == nil {
		return zero, fmt.Errorf("execution server at %s handed the call off to a background job unasked", c.base)
	}
	return *l.Result, nil
}

// callLine is call returning the final line: a result, or (POST /v1/run
// with sync_budget) a handoff.
func callLine[T any](parent context.Context, c *Client, path string, body any, d time.Duration, progress executor.ProgressFunc) (StreamLine[T], error) {
	var zero StreamLine[T]
	payload, err := json.Marshal(body)
	if err != nil {
		return zero, err
	}
	ctx, cancelDeadline := context.WithTimeout(parent, d)
	defer cancelDeadline()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The watchdog: every line (and the response headers) resets it.
	idle := time.AfterFunc(c.opts.TimeoutBuffer, func() { cancel(&errIdle{url: c.base, d: c.opts.TimeoutBuffer}) })
	defer idle.Stop()

	req, err := c.newRequest(ctx, http.MethodPost, path, payload)
	if err != nil {
		return zero, err
	}
	req.Header.Set("Accept", MediaNDJSON+", application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return zero, c.callError(parent, ctx, d, err, false)
	}
	defer resp.Body.Close()
	idle.Reset(c.opts.TimeoutBuffer)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		return zero, c.statusError(resp)
	}
	dec := json.NewDecoder(resp.Body)
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		// A server that does not stream answers with the plain result (or,
		// 202, the handoff).
		if resp.StatusCode == http.StatusAccepted {
			var h RunHandoff
			if err := dec.Decode(&h); err != nil {
				return zero, c.callError(parent, ctx, d, err, true)
			}
			return StreamLine[T]{Handoff: &h}, nil
		}
		var v T
		if err := dec.Decode(&v); err != nil {
			return zero, c.callError(parent, ctx, d, err, true)
		}
		return StreamLine[T]{Result: &v}, nil
	}
	for {
		var l StreamLine[T]
		if err := dec.Decode(&l); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return zero, c.callError(parent, ctx, d, err, true)
		}
		idle.Reset(c.opts.TimeoutBuffer)
		switch {
		case l.Error != nil:
			return zero, c.detailError(*l.Error)
		case l.Result != nil, l.Handoff != nil:
			return l, nil
		case l.Progress != nil && progress != nil:
			progress(fromEvent(l.Progress))
		case l.Job != nil:
			if hook, ok := parent.Value(jobHookKey{}).(func(jobs.Job)); ok {
				hook(*l.Job)
			}
		}
	}
}

// callError explains a failed call: the caller's own cancellation passes
// through untouched; otherwise it says which server and what happened.
func (c *Client) callError(parent, ctx context.Context, d time.Duration, err error, connected bool) error {
	if parent.Err() != nil {
		return parent.Err()
	}
	if cause := context.Cause(ctx); cause != nil {
		var ie *errIdle
		if errors.As(cause, &ie) {
			return ie
		}
		if errors.Is(cause, context.DeadlineExceeded) {
			return fmt.Errorf("execution server at %s did not finish within %s (the run's timeout plus the %s buffer, MCP_HTTP_TIMEOUT)", c.base, d.Round(time.Millisecond), c.opts.TimeoutBuffer)
		}
	}
	return c.transportError(ctx, err, connected)
}

func (c *Client) transportError(ctx context.Context, err error, connected bool) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if connected {
		return fmt.Errorf("lost the connection to execution server at %s: %w", c.base, err)
	}
	return fmt.Errorf("cannot reach execution server at %s: %w (is `pyexec serve` running there?)", c.base, err)
}

// statusError turns an error response into an error; a rejected request
// becomes an *engine.RequestError again, exactly as the local executor
// returns it.
func (c *Client) statusError(resp *http.Response) error {
	d, err := c.errorDetail(resp)
	if err != nil {
		return err
	}
	return c.detailError(d)
}

// errorDetail reads an error response's detail; an answer that is not an
// ErrorBody is an error of its own.
func (c *Client) errorDetail(resp *http.Response) (ErrorDetail, error) {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb ErrorBody
	if err := json.Unmarshal(data, &eb); err == nil && eb.Error.Code != "" {
		return eb.Error, nil
	}
	text := strings.TrimSpace(string(data))
	if len(text) > 300 {
		text = text[:300] + "..."
	}
	return ErrorDetail{}, fmt.Errorf("execution server at %s answered HTTP %d: %s", c.base, resp.StatusCode, text)
}

// RemoteError is an error reported by the execution server.
type RemoteError struct {
	URL    string
	Detail ErrorDetail
}

func (e *RemoteError) Error() string {
	switch e.Detail.Code {
	case CodeUnauthorized:
		return fmt.Sprintf("execution server at %s refused the request: %s. Give pyexec mcp the server's token with --token-file FILE or PYEXEC_TOKEN (on the server's machine, the same --state-dir as `pyexec serve` is enough)", e.URL, e.Detail.Message)
	case CodeBusy, CodeNotFound:
		// The executor's own words, as the local executor would say them.
		return e.Detail.Message
	}
	return fmt.Sprintf("execution server at %s: %s", e.URL, e.Detail.Message)
}

// Is lets errors.Is see the remote error as the local one: busy (the
// admission limit or the job queue), an unknown job, a closed job manager.
func (e *RemoteError) Is(target error) bool {
	switch e.Detail.Code {
	case CodeBusy:
		return target == errBusy || (target == jobs.ErrBusy && strings.HasPrefix(e.Detail.Message, jobs.ErrBusy.Error()))
	case CodeNotFound:
		return target == jobs.ErrNotFound
	case CodeUnavailable:
		return target == jobs.ErrClosed
	case CodeStorageFull:
		return target == jobs.ErrStateFull
	case CodeConflict:
		return target == jobs.ErrForeign
	}
	return false
}

func (c *Client) detailError(d ErrorDetail) error {
	if d.Code == CodeInvalidRequest {
		return &engine.RequestError{Field: d.Field, Message: d.Message}
	}
	return &RemoteError{URL: c.base, Detail: d}
}

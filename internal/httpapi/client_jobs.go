package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
)

// The client side of background jobs: Client is an executor.JobExecutor, so
// the MCP job tools, resources and subscriptions work against a remote
// server exactly as against the local one.

var _ executor.JobExecutor = (*Client)(nil)

// RunOrHandoff implements executor.JobExecutor: POST /v1/run with
// sync_budget, streaming progress; the answer is the result or the job the
// run was handed off to.
func (c *Client) RunOrHandoff(ctx context.Context, req engine.Request, opts executor.SyncOptions, progress executor.ProgressFunc) (executor.Outcome, error) {
	if opts.Budget <= 0 && opts.OutputBudget <= 0 && !opts.Keep {
		res, err := c.Run(ctx, req, progress)
		if err != nil {
			return executor.Outcome{}, err
		}
		return executor.Outcome{Result: &res}, nil
	}
	d, err := c.deadline(ctx, []engine.Request{req})
	if err != nil {
		return executor.Outcome{}, err
	}
	if opts.Keep {
		// A kept job has the job limit, not the run maximum, and the
		// stream's heartbeats tell a live run from a dead server.
		d = max(d, 24*time.Hour)
	}
	body := RunRequest{Request: req, SyncBudget: max(opts.Budget, 0).Seconds(), JobLabel: opts.Label, KeepJob: opts.Keep, OutputBudget: opts.OutputBudget}
	if opts.OnJob != nil {
		ctx = context.WithValue(ctx, jobHookKey{}, opts.OnJob)
	}
	l, err := callLine[engine.Result](ctx, c, "/v1/run", body, max(d, opts.Budget+c.opts.TimeoutBuffer), progress)
	if err != nil {
		return executor.Outcome{}, err
	}
	if l.Handoff != nil {
		out := l.Handoff.Output
		return executor.Outcome{Job: l.Handoff.Job, Output: &out}, nil
	}
	return executor.Outcome{Result: l.Result, Kept: l.Result != nil && l.Result.OutputJobID != ""}, nil
}

// jobHookKey carries SyncOptions.OnJob to callLine, which hears the job
// line of a keep_job stream.
type jobHookKey struct{}

// Start implements executor.JobExecutor.
func (c *Client) Start(ctx context.Context, req engine.Request, label string) (jobs.Job, error) {
	var j jobs.Job
	err := c.jsonCall(ctx, http.MethodPost, "/v1/jobs", StartJobRequest{Request: req, JobLabel: label}, &j, 0)
	return j, err
}

// Job implements executor.JobExecutor.
func (c *Client) Job(ctx context.Context, id string) (jobs.Job, error) {
	var j jobs.Job
	err := c.jsonCall(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &j, 0)
	return j, err
}

// Output implements executor.JobExecutor (a long-poll when cur.Wait > 0).
func (c *Client) Output(ctx context.Context, id string, cur jobs.Cursor) (jobs.Chunk, error) {
	q := url.Values{}
	if cur.StdoutOffset > 0 {
		q.Set("stdout_offset", strconv.FormatInt(cur.StdoutOffset, 10))
	}
	if cur.StderrOffset > 0 {
		q.Set("stderr_offset", strconv.FormatInt(cur.StderrOffset, 10))
	}
	if cur.MaxBytes > 0 {
		q.Set("max_bytes", strconv.Itoa(cur.MaxBytes))
	}
	if cur.Wait > 0 {
		q.Set("wait", strconv.FormatFloat(cur.Wait.Seconds(), 'f', -1, 64))
	}
	path := "/v1/jobs/" + url.PathEscape(id) + "/output"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var ch jobs.Chunk
	err := c.jsonCall(ctx, http.MethodGet, path, nil, &ch, min(cur.Wait, MaxOutputWait))
	return ch, err
}

// Cancel implements executor.JobExecutor.
func (c *Client) Cancel(ctx context.Context, id string) (jobs.Job, error) {
	var j jobs.Job
	err := c.jsonCall(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, &j, 0)
	return j, err
}

// Jobs implements executor.JobExecutor.
func (c *Client) Jobs(ctx context.Context, f jobs.Filter) (jobs.JobList, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", string(f.Status))
	}
	if f.Label != "" {
		q.Set("label", f.Label)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.IncludeRequest {
		q.Set("include_request", "true")
	}
	path := "/v1/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l jobs.JobList
	err := c.jsonCall(ctx, http.MethodGet, path, nil, &l, 0)
	return l, err
}

// Prune implements executor.JobExecutor.
func (c *Client) Prune(ctx context.Context, opts jobs.PruneOptions) (jobs.PruneResult, error) {
	var r jobs.PruneResult
	err := c.jsonCall(ctx, http.MethodPost, "/v1/jobs/prune", PruneRequest{KeepCompleted: opts.KeepCompleted, KeepFailed: opts.KeepFailed, MaxAgeHours: opts.MaxAgeHours}, &r, 0)
	return r, err
}

// Subscribe implements executor.JobExecutor over GET /v1/jobs/{id}/events
// (server-sent events). The channel closes when the job ends, the stream
// breaks or cancel is called.
func (c *Client) Subscribe(ctx context.Context, id string) (<-chan jobs.Event, func(), error) {
	if id == "" {
		return nil, nil, fmt.Errorf("execution server at %s: subscribing to every job at once is not offered remotely; subscribe to one job", c.base)
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := c.newRequest(sctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	// Only the connection and the answer's status are bounded; the stream
	// itself lasts as long as the job.
	connected := time.AfterFunc(c.opts.TimeoutBuffer, cancel)
	resp, err := c.hc.Do(req)
	connected.Stop()
	if err != nil {
		cancel()
		return nil, nil, c.transportError(sctx, err, false)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		cancel()
		return nil, nil, c.statusError(resp)
	}
	events := make(chan jobs.Event, 16)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue // event names, ids, keepalive comments, blank lines
			}
			var ev JobEvent
			if json.Unmarshal([]byte(data), &ev) != nil {
				continue
			}
			select {
			case events <- jobs.Event{JobID: ev.JobID, Status: ev.Status, Output: ev.Output, Progress: ev.Progress, Done: ev.Done}:
			case <-sctx.Done():
				return
			}
		}
	}()
	return events, cancel, nil
}

// jsonCall sends a JSON request and decodes the JSON answer, within the
// buffer (plus extra, for long-polls).
func (c *Client) jsonCall(ctx context.Context, method, path string, body, out any, extra time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.TimeoutBuffer+extra)
	defer cancel()
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	req, err := c.newRequest(ctx, method, path, payload)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.transportError(ctx, err, false)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return c.statusError(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return c.transportError(ctx, err, true)
	}
	return nil
}

// Artifact implements executor.JobArtifacts.
func (c *Client) Artifact(ctx context.Context, id, name string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.TimeoutBuffer+fileTimeout)
	defer cancel()
	resp, err := c.fileRequest(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/artifacts/"+url.PathEscape(name), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, "", c.transportError(ctx, err, true)
	}
	return data, resp.Header.Get("Content-Type"), nil
}

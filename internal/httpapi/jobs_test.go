package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/jobs"
)

type sseEvent struct{ name, id, data string }

// readSSE parses a server-sent event stream until it ends.
func readSSE(t *testing.T, resp *http.Response, each func(sseEvent)) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.name != "" {
				each(ev)
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func getSSE(t *testing.T, url string, headers ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestJobsREST(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, withJobs(t, f.local(t, nil)), nil)
	testJobsREST(t, ts.URL, true)
}

// TestJobsRESTOnReplicas runs the same REST calls through a balancer in
// front of three replicas on PostgreSQL: every call may land on another
// replica than the one running the job.
func TestJobsRESTOnReplicas(t *testing.T) {
	f := newFixture(t)
	testJobsREST(t, replicaSet(t, f, 3, nil), false)
}

// testJobsREST drives the jobs API of the server at base. single says it
// is one server (its metrics then count every call).
func testJobsREST(t *testing.T, base string, single bool) {
	doc := loadDoc(t, base)
	check := func(method, path string, r response, status int) {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, r.status, status, r.body)
		}
		route := path
		if i := strings.IndexByte(route, '?'); i >= 0 {
			route = route[:i]
		}
		if parts := strings.Split(route, "/"); len(parts) >= 4 && parts[3] != "prune" {
			parts[3] = "{id}"
			route = strings.Join(parts, "/")
		}
		validate(t, doc.schemaFor(t, method, route, fmt.Sprint(status), "application/json"), r.body, method+" "+path)
	}

	// Start, then stream the job's output live over SSE.
	r := do(t, "POST", base+"/v1/jobs", map[string]any{"code": "import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.2)\n", "job_label": "sse"})
	check("POST", "/v1/jobs", r, 202)
	var j jobs.Job
	r.json(t, &j)
	if r.header.Get("Location") != "/v1/jobs/"+j.ID {
		t.Fatalf("Location %q", r.header.Get("Location"))
	}
	var names []string
	var stdout strings.Builder
	var last jobs.Job
	readSSE(t, getSSE(t, base+"/v1/jobs/"+j.ID+"/output"), func(ev sseEvent) {
		names = append(names, ev.name)
		switch ev.name {
		case "output":
			var ch jobs.Chunk
			if err := json.Unmarshal([]byte(ev.data), &ch); err != nil {
				t.Fatal(err)
			}
			if ev.id != fmt.Sprintf("%d:%d", ch.StdoutOffset, ch.StderrOffset) {
				t.Errorf("event id %q for chunk %+v", ev.id, ch)
			}
			stdout.WriteString(ch.Stdout)
		case "status", "end":
			if err := json.Unmarshal([]byte(ev.data), &last); err != nil {
				t.Fatal(err)
			}
		}
	})
	if stdout.String() != "line 0\nline 1\nline 2\n" || names[0] != "status" || names[len(names)-1] != "end" || last.Status != jobs.StatusCompleted {
		t.Fatalf("events %v, stdout %q, last %+v", names, stdout.String(), last)
	}
	// Resuming from an event id sends only what follows it.
	stdout.Reset()
	readSSE(t, getSSE(t, base+"/v1/jobs/"+j.ID+"/output", "Last-Event-ID", "7:0"), func(ev sseEvent) {
		if ev.name == "output" {
			var ch jobs.Chunk
			json.Unmarshal([]byte(ev.data), &ch)
			stdout.WriteString(ch.Stdout)
		}
	})
	if stdout.String() != "line 1\nline 2\n" {
		t.Fatalf("resumed stdout %q", stdout.String())
	}

	// Plain reads by cursor.
	r = do(t, "GET", base+"/v1/jobs/"+j.ID+"/output?stdout_offset=7&wait=1", nil)
	check("GET", "/v1/jobs/"+j.ID+"/output", r, 200)
	var ch jobs.Chunk
	r.json(t, &ch)
	if ch.Stdout != "line 1\nline 2\n" || !ch.Done {
		t.Fatalf("chunk %+v", ch)
	}
	check("GET", "/v1/jobs/"+j.ID, do(t, "GET", base+"/v1/jobs/"+j.ID, nil), 200)
	r = do(t, "GET", base+"/v1/jobs?label=sse&include_request=true", nil)
	check("GET", "/v1/jobs", r, 200)
	var l jobs.JobList
	r.json(t, &l)
	if l.Total != 1 || l.Jobs[0].Request == nil {
		t.Fatalf("list %+v", l)
	}

	// Errors.
	check("GET", "/v1/jobs/nope", do(t, "GET", base+"/v1/jobs/nope", nil), 404)
	check("POST", "/v1/jobs/nope/cancel", do(t, "POST", base+"/v1/jobs/nope/cancel", nil), 404)
	check("GET", "/v1/jobs/nope/output", do(t, "GET", base+"/v1/jobs/nope/output", nil), 404)
	if r := getSSE(t, base+"/v1/jobs/nope/output"); r.StatusCode != 404 {
		t.Fatalf("SSE of an unknown job: %d", r.StatusCode)
	}
	for _, q := range []string{"status=done", "limit=-1", "limit=x", "include_request=maybe"} {
		r := do(t, "GET", base+"/v1/jobs?"+q, nil)
		check("GET", "/v1/jobs", r, 400)
		if r.errorBody(t).Field == "" {
			t.Errorf("%s: no field named", q)
		}
	}
	r = do(t, "GET", base+"/v1/jobs/"+j.ID+"/output?wait=soon", nil)
	if r.status != 400 || r.errorBody(t).Field != "wait" {
		t.Fatalf("bad wait: %d %s", r.status, r.body)
	}
	check("POST", "/v1/jobs", do(t, "POST", base+"/v1/jobs", map[string]any{"code": "1", "bogus": 1}), 400)

	// Smart-async over REST: a sync run past its budget answers 202 with the
	// job and the output so far; streamed, the last line is the handoff.
	r = do(t, "POST", base+"/v1/run", map[string]any{"code": "import time\nprint('early', flush=True)\ntime.sleep(60)", "sync_budget": 0.5, "job_label": "h", "timeout": 120})
	check("POST", "/v1/run", r, 202)
	var h httpapi.RunHandoff
	r.json(t, &h)
	if h.Job.Status != jobs.StatusRunning || h.Job.Label != "h" {
		t.Fatalf("handoff %+v", h)
	}
	check("POST", "/v1/jobs/"+h.Job.ID+"/cancel", do(t, "POST", base+"/v1/jobs/"+h.Job.ID+"/cancel", nil), 200)
	resp := postStream(t, context.Background(), base+"/v1/run", map[string]any{"code": "import time; time.sleep(60)", "sync_budget": 0.7, "timeout": 120})
	var sawProgress, sawHandoff bool
	readLines(t, resp, func(l httpapi.StreamLine[engine.Result]) {
		sawProgress = sawProgress || l.Progress != nil
		if l.Handoff != nil {
			sawHandoff = true
			do(t, "POST", base+"/v1/jobs/"+l.Handoff.Job.ID+"/cancel", nil)
		}
	})
	if !sawProgress || !sawHandoff {
		t.Fatalf("stream: progress %v handoff %v", sawProgress, sawHandoff)
	}
	// Within the budget it is a plain result.
	r = do(t, "POST", base+"/v1/run", map[string]any{"code": "print(7)", "sync_budget": 10})
	check("POST", "/v1/run", r, 200)

	m := string(do(t, "GET", base+"/metrics", nil).body)
	for _, want := range []string{`pyexec_jobs_started_total 1`, `pyexec_runs_total{outcome="handoff"} 2`, `pyexec_jobs_pending 0`, "pyexec_jobs_running "} {
		if single && !strings.Contains(m, want) { // a replica's metrics count only its own calls
			t.Errorf("metrics lack %q", want)
		}
	}

	r = do(t, "POST", base+"/v1/jobs/prune", map[string]any{"keep_failed": false})
	check("POST", "/v1/jobs/prune", r, 200)
	var pr jobs.PruneResult
	r.json(t, &pr)
	if pr.Removed < 2 {
		t.Fatalf("prune %+v", pr)
	}
}

// TestJobQueueBusy: past --max-queue pending jobs, starting one more is a
// clear 429, and the remote client reports it as the jobs package's busy
// error.
func TestJobQueueBusy(t *testing.T) {
	f := newFixture(t)
	jx, err := executor.OpenLocalJobs(context.Background(), f.local(t, nil), jobs.Config{StateDir: t.TempDir(), MaxConcurrent: 1, MaxQueue: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jx.Close(context.Background()) })
	ts, _ := serve(t, jx, nil)
	c, _ := httpapi.NewClient(ts.URL, httpapi.ClientOptions{})
	sleep := engine.Request{Code: "import time; time.sleep(60)", Timeout: 120}
	var ids []string
	for range 2 { // one running, one pending
		j, err := c.Start(context.Background(), sleep, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	r := do(t, "POST", ts.URL+"/v1/jobs", sleep)
	if r.status != 429 || r.errorBody(t).Code != "busy" {
		t.Fatalf("third job: %d %s", r.status, r.body)
	}
	_, err = c.Start(context.Background(), sleep, "")
	if !errors.Is(err, jobs.ErrBusy) || !strings.HasPrefix(err.Error(), jobs.ErrBusy.Error()) {
		t.Fatalf("client: %v", err)
	}
	m := string(do(t, "GET", ts.URL+"/metrics", nil).body)
	if !strings.Contains(m, "pyexec_jobs_pending 1") || !strings.Contains(m, "pyexec_jobs_running 1") {
		t.Errorf("queue metrics:\n%s", m)
	}
	for _, id := range ids {
		if _, err := c.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
}

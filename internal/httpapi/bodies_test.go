package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
)

// bigBatch is a batch of n entries whose code is about size bytes each
// (a comment), waiting for gate when one is given.
func bigBatch(n, size int, gate string) []byte {
	code := "#" + strings.Repeat("x", size) + "\nprint('done')\n"
	if gate != "" {
		code = "import os, time\nwhile not os.path.exists(" + jsonString(gate) + "):\n    time.sleep(0.02)\n#" + strings.Repeat("x", size) + "\nprint('done')\n"
	}
	reqs := make([]engine.Request, n)
	for i := range reqs {
		reqs[i] = engine.Request{Code: code}
	}
	b, _ := json.Marshal(executor.BatchRequest{Requests: reqs})
	return b
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestBodyBudget: the bytes of request bodies in flight are bounded. While
// a large batch runs (holding its body), another large body is refused at
// once with 429 and a message naming the budget, without being read; small
// requests still fit; once the batch is done the big one goes through. A
// body of unknown length (chunked) is metered as it arrives.
func TestBodyBudget(t *testing.T) {
	f := newFixture(t)
	budget := int64(30 << 20)
	ts, _ := serve(t, f.local(t, nil), func(o *httpapi.Options) { o.BodyBudget = budget; o.MaxInFlight = -1 })
	gate := filepath.Join(f.workspace, "go")

	// Opened at the end, or at once if the test fails first.
	openGate := sync.OnceFunc(func() { os.WriteFile(gate, nil, 0o644) })
	t.Cleanup(openGate)

	// ~20 MB, running until the gate opens. Streamed (NDJSON): its first
	// progress line says it is admitted and running, its body charged.
	first := bigBatch(20, 1_000_000, gate)
	req, _ := http.NewRequest("POST", ts.URL+"/v1/batch", bytes.NewReader(first))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", httpapi.MediaNDJSON)
	firstResp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer firstResp.Body.Close()
	lines := bufio.NewScanner(firstResp.Body)
	lines.Buffer(nil, 64<<20)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), `{"progress"`) {
		t.Fatalf("first batch: %d %q", firstResp.StatusCode, lines.Text())
	}

	second := bigBatch(15, 1_000_000, "")
	r := do(t, "POST", ts.URL+"/v1/batch", second)
	e := r.errorBody(t)
	if r.status != http.StatusTooManyRequests || e.Code != httpapi.CodeBusy || !strings.Contains(e.Message, "30 MiB") || !strings.Contains(e.Message, "--max-body-memory") || r.header.Get("Retry-After") == "" {
		t.Fatalf("second big body while the first is held: %d %+v", r.status, e)
	}
	// A body of unknown length (sent chunked) is metered as it streams in.
	pr, pw := io.Pipe()
	go func() { pw.Write(second); pw.Close() }()
	req, _ = http.NewRequest("POST", ts.URL+"/v1/batch", pr)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var eb httpapi.ErrorBody
	json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || eb.Error.Code != httpapi.CodeBusy || !strings.Contains(eb.Error.Message, "unknown length") {
		t.Fatalf("chunked big body: %d %+v", resp.StatusCode, eb)
	}
	// Small requests fit next to the big one.
	if r := do(t, "POST", ts.URL+"/v1/run", engine.Request{Code: "print('small')"}); r.status != 200 {
		t.Fatalf("small run beside the big batch: %d %s", r.status, r.body)
	}

	openGate()
	var last string
	for lines.Scan() {
		last = lines.Text()
	}
	if !strings.HasPrefix(last, `{"result"`) || strings.Count(last, `"stdout":"done\n"`) != 20 {
		t.Fatalf("first batch's last line: %.300s", last)
	}
	var out executor.BatchResult
	r = do(t, "POST", ts.URL+"/v1/batch", second)
	r.json(t, &out)
	if r.status != 200 || len(out.Results) != 15 || out.Results[14].Stdout != "done\n" {
		t.Fatalf("second batch once the first is done: %d %d results", r.status, len(out.Results))
	}
}

// TestQueryNumbers: query parameters that become durations or offsets are
// refused when they are not finite, non-negative numbers in range.
func TestQueryNumbers(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, withJobs(t, f.local(t, nil)), nil)
	for _, c := range []struct{ query, field string }{
		{"wait=NaN", "wait"},
		{"wait=Inf", "wait"},
		{"wait=-1", "wait"},
		{"stdout_offset=99999999999999999999", "stdout_offset"},
		{"stderr_offset=-5", "stderr_offset"},
		{"max_bytes=1e3", "max_bytes"},
	} {
		r := do(t, "GET", ts.URL+"/v1/jobs/nosuchjob/output?"+c.query, nil)
		if e := r.errorBody(t); r.status != 400 || e.Field != c.field {
			t.Errorf("%s: %d %+v", c.query, r.status, e)
		}
	}
	if r := do(t, "POST", ts.URL+"/v1/jobs/prune", `{"max_age_hours": -1}`); r.status != 400 || r.errorBody(t).Field != "max_age_hours" {
		t.Errorf("negative max_age_hours: %d %s", r.status, r.body)
	}
	// 1e300 hours is just "any age", never a wrapped date in the future.
	if r := do(t, "POST", ts.URL+"/v1/jobs/prune", `{"max_age_hours": 1e300}`); r.status != 200 {
		t.Errorf("huge max_age_hours: %d %s", r.status, r.body)
	}
}

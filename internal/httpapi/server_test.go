package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
)

func TestRESTStatuses(t *testing.T) {
	f := newFixture(t)
	// A body over the largest request (6 MiB: every field at its limit,
	// JSON escaping included) is refused unread.
	ex := f.local(t, func(c *engine.Config) { c.CodeLimit = 1000 })
	ts, _ := serve(t, ex, nil)
	huge := `{"code": "` + strings.Repeat("x", 7<<20) + `"}`

	cases := []struct {
		name         string
		method, path string
		body         any
		headers      []string
		status       int
		code, field  string
	}{
		{"run ok", "POST", "/v1/run", engine.Request{Code: "print(1)"}, nil, 200, "", ""},
		{"failed run is still 200", "POST", "/v1/run", engine.Request{Code: "raise SystemExit(3)"}, nil, 200, "", ""},
		{"both code and script", "POST", "/v1/run", engine.Request{Code: "1", ScriptPath: "hello.py"}, nil, 400, "invalid_request", "code"},
		{"escape", "POST", "/v1/run", engine.Request{ScriptPath: "../etc/passwd.py"}, nil, 400, "invalid_request", "script_path"},
		{"code over limit", "POST", "/v1/run", engine.Request{Code: strings.Repeat("#", 1001)}, nil, 400, "invalid_request", "code"},
		{"unknown field", "POST", "/v1/run", `{"cod": "print(1)"}`, nil, 400, "invalid_request", "cod"},
		{"unknown field in a batch entry", "POST", "/v1/batch", `{"requests": [{"code": "1"}, {"code": "1", "timeout_seconds": 3}]}`, nil, 400, "invalid_request", "requests[1].timeout_seconds"},
		{"wrong type in a batch entry", "POST", "/v1/batch", `{"requests": [{"code": "1", "timeout": "3"}]}`, nil, 400, "invalid_request", "requests[0].timeout"},
		{"NUL in args", "POST", "/v1/run", `{"code": "1", "args": ["a\u0000b"]}`, nil, 400, "invalid_request", "args"},
		{"NUL in an env name", "POST", "/v1/run", `{"code": "1", "env_vars": {"A\u0000": "x"}}`, nil, 400, "invalid_request", "env_vars"},
		{"NUL in cwd", "POST", "/v1/run", `{"code": "1", "cwd": "a\u0000"}`, nil, 400, "invalid_request", "cwd"},
		{"stdin over its limit", "POST", "/v1/run", engine.Request{Code: "1", Stdin: strings.Repeat("s", 1<<20+1)}, nil, 400, "invalid_request", "stdin"},
		{"negative sync_budget", "POST", "/v1/run", `{"code": "1", "sync_budget": -1}`, nil, 400, "invalid_request", "sync_budget"},

		{"wrong type", "POST", "/v1/run", `{"code": 5}`, nil, 400, "invalid_request", "code"},
		{"empty body", "POST", "/v1/run", "", nil, 400, "invalid_request", ""},
		{"bad json", "POST", "/v1/run", `{"code": `, nil, 400, "invalid_request", ""},
		{"two objects", "POST", "/v1/run", `{"code": "1"} {}`, nil, 400, "invalid_request", ""},
		{"body too large", "POST", "/v1/run", huge, nil, 413, "payload_too_large", ""},
		{"not json", "POST", "/v1/run", "code=1", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", ""},
		{"wrong method", "GET", "/v1/run", nil, nil, 405, "method_not_allowed", ""},
		{"unknown route", "GET", "/v2/everything", nil, nil, 404, "not_found", ""},
		{"empty batch", "POST", "/v1/batch", executor.BatchRequest{}, nil, 400, "invalid_request", "codes"},
		{"batch ok", "POST", "/v1/batch", executor.BatchRequest{Requests: []engine.Request{{Code: "print(1)"}, {Code: "1/0"}}}, nil, 200, "", ""},
		{"info", "GET", "/v1/info", nil, nil, 200, "", ""},
		{"health", "GET", "/health", nil, nil, 200, "", ""},
		{"metrics", "GET", "/metrics", nil, nil, 200, "", ""},
		{"openapi", "GET", "/openapi.json", nil, nil, 200, "", ""},
		{"rebinding", "GET", "/v1/info", nil, []string{"Host", "attacker.example:80"}, 403, "forbidden", ""},
		{"cross-origin browser post", "POST", "/v1/run", engine.Request{Code: "1"}, []string{"Sec-Fetch-Site", "cross-site"}, 403, "forbidden", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := doHost(t, tc.method, ts.URL+tc.path, tc.body, tc.headers...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code == "" {
				return
			}
			e := r.errorBody(t)
			if e.Code != tc.code || e.Field != tc.field || e.Message == "" {
				t.Fatalf("error %+v, want code %q field %q", e, tc.code, tc.field)
			}
		})
	}
}

// doHost is do, with a Host header override (http.Request ignores it in
// Header).
func doHost(t *testing.T, method, url string, body any, headers ...string) response {
	t.Helper()
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req, _ := http.NewRequest(method, url, nil)
			req.Host = headers[i+1]
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var r response
			r.status = resp.StatusCode
			var eb json.RawMessage
			_ = json.NewDecoder(resp.Body).Decode(&eb)
			r.body = eb
			return r
		}
	}
	return do(t, method, url, body, headers...)
}

func TestRunResultAndMetrics(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), nil)
	r := do(t, "POST", ts.URL+"/v1/run", engine.Request{Code: `print("Hello 'world' with \"quotes\" and $variables")`})
	var res engine.Result
	r.json(t, &res)
	if res.Stdout != "Hello 'world' with \"quotes\" and $variables\n" || !res.Success || res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	do(t, "POST", ts.URL+"/v1/run", engine.Request{Code: "raise SystemExit(2)"})
	do(t, "POST", ts.URL+"/v1/run", engine.Request{Code: "import time; time.sleep(5)", Timeout: 0.3})
	do(t, "POST", ts.URL+"/v1/run", engine.Request{ScriptPath: "notes.txt"})
	m := string(do(t, "GET", ts.URL+"/metrics", nil).body)
	for _, want := range []string{
		`pyexec_runs_total{outcome="success"} 1`,
		`pyexec_runs_total{outcome="failure"} 1`,
		`pyexec_runs_total{outcome="timeout"} 1`,
		`pyexec_runs_total{outcome="rejected"} 1`,
		`pyexec_run_duration_seconds_count 3`,
		`pyexec_runs_in_flight 0`,
		`pyexec_http_requests_total{code="200",route="run"} 3`,
		`pyexec_http_requests_total{code="400",route="run"} 1`,
		`pyexec_build_info{version="test"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Histogram buckets are round numbers.
	les := regexp.MustCompile(`le="([^"]+)"`).FindAllStringSubmatch(m, -1)
	if len(les) < 10 {
		t.Fatalf("few bucket labels: %d", len(les))
	}
	for _, le := range les {
		if !regexp.MustCompile(`^(\+Inf|[0-9]+(\.[0-9]{1,4})?)$`).MatchString(le[1]) {
			t.Errorf("bucket le=%q is not a round number", le[1])
		}
	}
}

func TestAuth(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), func(o *httpapi.Options) { o.Token = "s3cret" })
	for _, path := range []string{"/v1/info", "/metrics", "/openapi.json"} {
		if r := do(t, "GET", ts.URL+path, nil); r.status != 401 || r.errorBody(t).Code != "unauthorized" || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s without token: %d %s", path, r.status, r.body)
		}
		if r := do(t, "GET", ts.URL+path, nil, "Authorization", "Bearer wrong"); r.status != 401 {
			t.Errorf("%s with a wrong token: %d", path, r.status)
		}
		if r := do(t, "GET", ts.URL+path, nil, "Authorization", "Bearer s3cret"); r.status != 200 {
			t.Errorf("%s with the token: %d %s", path, r.status, r.body)
		}
	}
	for _, c := range []struct{ path string }{{"/v1/run"}, {"/execute"}, {"/mcp"}} {
		if r := do(t, "POST", ts.URL+c.path, `{}`); r.status != 401 {
			t.Errorf("POST %s without token: %d", c.path, r.status)
		}
	}
	// /health needs no token, but only an authorized caller sees the
	// working directory.
	var h httpapi.Health
	r := do(t, "GET", ts.URL+"/health", nil)
	r.json(t, &h)
	if r.status != 200 || h.Status != "healthy" || h.WorkingDirectory != "" {
		t.Fatalf("public health: %d %+v", r.status, h)
	}
	do(t, "GET", ts.URL+"/health", nil, "Authorization", "Bearer s3cret").json(t, &h)
	if h.WorkingDirectory != f.workspace {
		t.Fatalf("authorized health: %+v", h)
	}
}

func TestSeedExecute(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), nil)
	var out httpapi.ExecuteResponse
	r := do(t, "POST", ts.URL+"/execute", map[string]any{"script_path": "hello.py", "timeout": 10})
	r.json(t, &out)
	if r.status != 200 || out.Stdout != "Hello from UV HTTP MCP!\n" || !out.Success || out.ReturnCode != 0 || out.WorkingDirectory != f.workspace || out.ScriptPath != "hello.py" {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		body   string
		status int
	}{
		{`{"script_path": "../hello.py"}`, 400},
		{`{"script_path": "notes.txt"}`, 400},
		{`{"script_path": "missing.py"}`, 400},
		{`{"timeout": 3}`, 400},
	} {
		r := do(t, "POST", ts.URL+"/execute", c.body)
		var e httpapi.ExecuteError
		r.json(t, &e)
		if r.status != c.status || e.Detail == "" || e.Error.Field != "script_path" {
			t.Errorf("%s: %d %s", c.body, r.status, r.body)
		}
	}
}

// readLines reads an NDJSON stream, calling each for every decoded line.
func readLines[T any](t *testing.T, resp *http.Response, each func(httpapi.StreamLine[T])) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var l httpapi.StreamLine[T]
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		each(l)
	}
}

func postStream(t *testing.T, ctx context.Context, url string, body any, headers ...string) *http.Response {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(string(data)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", httpapi.MediaNDJSON)
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

func TestRunStreamsProgressThenResult(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), nil)
	resp := postStream(t, context.Background(), ts.URL+"/v1/run", engine.Request{Code: "import time\nprint('a', flush=True)\ntime.sleep(1.2)\nprint('b')"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != httpapi.MediaNDJSON {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var progress int
	var result *engine.Result
	readLines(t, resp, func(l httpapi.StreamLine[engine.Result]) {
		switch {
		case l.Progress != nil:
			if result != nil {
				t.Error("progress after the result")
			}
			progress++
		case l.Result != nil:
			result = l.Result
		default:
			t.Errorf("unexpected line %+v", l)
		}
	})
	if progress < 1 || result == nil || result.Stdout != "a\nb\n" {
		t.Fatalf("progress lines %d, result %+v", progress, result)
	}

	// A request rejected before it runs keeps its status even when a
	// stream was asked for.
	resp = postStream(t, context.Background(), ts.URL+"/v1/run", engine.Request{})
	if resp.StatusCode != 400 {
		t.Fatalf("rejected stream: %d", resp.StatusCode)
	}
}

func TestBusy(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), func(o *httpapi.Options) { o.MaxInFlight = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Hold the only slot: a streamed run that is in progress once its
	// first heartbeat arrives.
	resp := postStream(t, ctx, ts.URL+"/v1/run", engine.Request{Code: "import time; time.sleep(30)"})
	var l httpapi.StreamLine[engine.Result]
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || l.Progress == nil {
		t.Fatalf("first line %+v %v", l, err)
	}
	r := do(t, "POST", ts.URL+"/v1/run", engine.Request{Code: "print(1)"})
	if r.status != 429 || r.errorBody(t).Code != "busy" || r.header.Get("Retry-After") == "" {
		t.Fatalf("second run: %d %s", r.status, r.body)
	}
	r = do(t, "POST", ts.URL+"/execute", map[string]any{"script_path": "hello.py"})
	if r.status != 429 {
		t.Fatalf("seed execute while busy: %d %s", r.status, r.body)
	}
	// Cancelling the held request kills its run and frees the slot.
	cancel()
	resp.Body.Close()
}

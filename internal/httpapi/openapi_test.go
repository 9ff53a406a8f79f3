package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
)

// openAPIDoc is the served document, with a way to find the schema of one
// response.
type openAPIDoc struct {
	raw map[string]any
}

func (d openAPIDoc) schemaFor(t *testing.T, method, path, status, contentType string) *jsonschema.Resolved {
	t.Helper()
	get := func(m any, keys ...string) any {
		for _, k := range keys {
			mm, ok := m.(map[string]any)
			if !ok {
				return nil
			}
			m = mm[k]
		}
		return m
	}
	s := get(d.raw, "paths", path, strings.ToLower(method), "responses", status, "content", contentType, "schema")
	if s == nil {
		t.Fatalf("openapi documents no %s response %s (%s) for %s", status, contentType, method, path)
	}
	if ref, ok := get(s, "$ref").(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		s = get(d.raw, "components", "schemas", name)
		if s == nil {
			t.Fatalf("dangling $ref %s", ref)
		}
	}
	data, _ := json.Marshal(s)
	var schema jsonschema.Schema
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	r, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func loadDoc(t *testing.T, url string, headers ...string) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	do(t, "GET", url+"/openapi.json", nil, headers...).json(t, &doc.raw)
	return doc
}

func validate(t *testing.T, r *jsonschema.Resolved, body []byte, what string) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: not JSON: %v: %s", what, err, body)
	}
	if err := r.Validate(v); err != nil {
		t.Errorf("%s does not match the OpenAPI schema: %v\n%s", what, err, body)
	}
}

// TestOpenAPIMatchesRealResponses sends real requests and validates every
// response body (and every NDJSON line) against the schema that the served
// /openapi.json gives for that path, method, status and media type.
func TestOpenAPIMatchesRealResponses(t *testing.T) {
	f := newFixture(t)
	ex := f.local(t, func(c *engine.Config) { c.CodeLimit = 1000 })
	ts, _ := serve(t, ex, nil)

	doc := loadDoc(t, ts.URL)
	if doc.raw["openapi"] != "3.1.0" {
		t.Fatalf("openapi version %v", doc.raw["openapi"])
	}
	// Every $ref in the document resolves.
	data, _ := json.Marshal(doc.raw)
	for _, part := range strings.Split(string(data), `"$ref":"#/components/schemas/`)[1:] {
		name := part[:strings.IndexByte(part, '"')]
		if doc.raw["components"].(map[string]any)["schemas"].(map[string]any)[name] == nil {
			t.Errorf("dangling $ref to %s", name)
		}
	}

	// The validator is not vacuous: a wrong body fails.
	var bogus any
	_ = json.Unmarshal([]byte(`{"stdout": 1}`), &bogus)
	if err := doc.schemaFor(t, "POST", "/v1/run", "200", "application/json").Validate(bogus); err == nil {
		t.Fatal("a bogus result validated")
	}

	cases := []struct {
		method, path string
		body         any
		headers      []string
		status       string
	}{
		{"POST", "/v1/run", engine.Request{Code: "print('hi')"}, nil, "200"},
		{"POST", "/v1/run", engine.Request{Code: "import sys; sys.exit(4)"}, nil, "200"},
		{"POST", "/v1/run", engine.Request{}, nil, "400"},
		{"POST", "/v1/run", `{"code": "` + strings.Repeat("x", 7<<20) + `"}`, nil, "413"},
		{"POST", "/v1/run", "x", []string{"Content-Type", "text/plain"}, "415"},
		{"POST", "/v1/batch", executor.BatchRequest{Requests: []engine.Request{{Code: "print(1)"}, {ScriptPath: "no.py"}}}, nil, "200"},
		{"POST", "/v1/batch", executor.BatchRequest{}, nil, "400"},
		{"GET", "/v1/info", nil, nil, "200"},
		{"GET", "/health", nil, nil, "200"},
		{"POST", "/execute", map[string]any{"script_path": "hello.py"}, nil, "200"},
		{"POST", "/execute", map[string]any{"script_path": "../x.py"}, nil, "400"},
		{"GET", "/v1/info", nil, []string{"Host", "evil.example"}, "403"},
	}
	for _, c := range cases {
		r := doHost(t, c.method, ts.URL+c.path, c.body, c.headers...)
		if got := r.status; got != atoi(c.status) {
			t.Errorf("%s %s: status %d, want %s: %s", c.method, c.path, got, c.status, r.body)
			continue
		}
		validate(t, doc.schemaFor(t, c.method, c.path, c.status, "application/json"), r.body, c.method+" "+c.path+" "+c.status)
	}

	// Streamed responses: each line matches the line schema.
	for _, c := range []struct {
		path string
		body any
	}{
		{"/v1/run", engine.Request{Code: "import time; time.sleep(0.7); print(1)"}},
		{"/v1/batch", executor.BatchRequest{Requests: []engine.Request{{Code: "import time; time.sleep(0.7)"}}}},
	} {
		r := do(t, "POST", ts.URL+c.path, c.body, "Accept", "application/x-ndjson")
		schema := doc.schemaFor(t, "POST", c.path, "200", "application/x-ndjson")
		sc := bufio.NewScanner(bytes.NewReader(r.body))
		n := 0
		for sc.Scan() {
			n++
			validate(t, schema, sc.Bytes(), "stream line of "+c.path)
		}
		if n < 2 {
			t.Errorf("%s streamed %d lines, want progress and a result", c.path, n)
		}
	}

	// 401 with a token-protected server.
	ts2, _ := serve(t, ex, func(o *httpapi.Options) { o.Token = "t" })
	r := do(t, "GET", ts2.URL+"/v1/info", nil)
	validate(t, doc.schemaFor(t, "GET", "/v1/info", "401", "application/json"), r.body, "401")
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

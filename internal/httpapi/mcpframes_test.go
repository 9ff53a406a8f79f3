package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMCPOverHTTPBadBodies: over Streamable HTTP, a body that is not JSON,
// a message whose id is an object and a body over the largest request get
// JSON-RPC errors (-32700, -32600, the size limit named), and the endpoint
// goes on serving.
func TestMCPOverHTTPBadBodies(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), nil)
	for _, c := range []struct {
		name, body string
		status     int
		code       float64
		says       string
	}{
		{"garbage", "garbage", 400, -32700, "Parse error"},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, 400, -32600, "invalid ID type"},
		{"over the limit", `{"jsonrpc":"2.0","id":1,"method":"x","params":"` + strings.Repeat("a", 27<<20) + `"}`, 413, -32600, "the largest request this server reads is 26 MiB"},
	} {
		r := do(t, "POST", ts.URL+"/mcp", c.body, "Accept", "application/json, text/event-stream")
		var m struct {
			ID    any `json:"id"`
			Error struct {
				Code    float64 `json:"code"`
				Message string  `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.body, &m); err != nil || r.status != c.status || m.Error.Code != c.code || m.ID != nil || !strings.Contains(m.Error.Message, c.says) || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s (%v)", c.name, r.status, r.body, err)
		}
	}
	r := do(t, "POST", ts.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, "Accept", "application/json, text/event-stream")
	if r.status != 200 || !strings.Contains(string(r.body), `"protocolVersion"`) {
		t.Fatalf("initialize after the bad bodies: %d %s", r.status, r.body)
	}
}

package mcpstdio

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wire is a server on the transport and the raw client end of its pipes.
type wire struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
}

func serveOnPipes(t *testing.T, limit int64) *wire {
	t.Helper()
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	type in struct {
		S string `json:"s"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.S}}}, nil, nil
	})
	ss, err := srv.Connect(context.Background(), &Transport{Reader: c2sR, Writer: s2cW, MaxFrameBytes: limit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{t: t, in: c2sW, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(s2cR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	t.Cleanup(func() { c2sW.Close(); ss.Wait() })
	return w
}

func (w *wire) send(line string) {
	w.t.Helper()
	if _, err := io.WriteString(w.in, line+"\n"); err != nil {
		w.t.Fatalf("write: %v", err)
	}
}

func (w *wire) recv() map[string]any {
	w.t.Helper()
	select {
	case l, ok := <-w.lines:
		if !ok {
			w.t.Fatal("the server closed the connection")
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			var arr []any
			if json.Unmarshal([]byte(l), &arr) == nil {
				return map[string]any{"batch": arr}
			}
			w.t.Fatalf("reply is not JSON: %q", l)
		}
		return m
	case <-time.After(10 * time.Second):
		w.t.Fatal("no reply")
		return nil
	}
}

func errorOf(t *testing.T, m map[string]any) (code float64, msg string) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("want an error reply, got %v", m)
	}
	return e["code"].(float64), e["message"].(string)
}

// TestBadFramesAreAnswered: each bad line gets its own JSON-RPC error and
// the session goes on serving.
func TestBadFramesAreAnswered(t *testing.T) {
	w := serveOnPipes(t, 4096)
	w.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r := w.recv(); r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	w.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	big := strings.Repeat("x", 10000)
	for _, c := range []struct {
		name, line string
		code       float64
		id         any // nil: "id" must be null
		says       string
	}{
		{"garbage", "garbage", -32700, nil, "Parse error"},
		{"truncated JSON", `{"jsonrpc":"2.0","id":2,"method":`, -32700, nil, "not valid JSON"},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, -32600, nil, "id must be a string or a number, got an object"},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"tools/list"}`, -32600, nil, "got an array"},
		{"not an object", `42`, -32600, nil, "must be a JSON object"},
		{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"ping"}`, -32600, 3.0, "version"},
		{"empty batch", `[]`, -32600, nil, "empty batch"},
		{"oversized, id first", `{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{"name":"echo","arguments":{"s":"` + big + `"}}}`, -32600, "big-1", "the largest request this server reads is 4.0 KiB"},
		{"oversized, id last", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"s":"` + big + `","id":"inner"}},"id":77}`, -32600, 77.0, "Request too large"},
		{"oversized, no id", `{"jsonrpc":"2.0","method":"x","params":"` + big + `"}`, -32600, nil, "Request too large"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w.send(c.line)
			r := w.recv()
			code, msg := errorOf(t, r)
			if code != c.code || !strings.Contains(msg, c.says) {
				t.Fatalf("error %v %q, want %v containing %q", code, msg, c.code, c.says)
			}
			if id, has := r["id"]; !has || id != c.id {
				t.Fatalf("id = %v (present %v), want %v", id, has, c.id)
			}
		})
	}
	// The oversized error says how big and what the limit is, as data too.
	w.send(`{"jsonrpc":"2.0","id":"big-2","method":"x","params":"` + big + `"}`)
	data := w.recv()["error"].(map[string]any)["data"].(map[string]any)
	if data["limit_bytes"] != 4096.0 || data["size_bytes"].(float64) < 10000 {
		t.Fatalf("data %v", data)
	}

	// A batch (allowed in 2025-03-26) gets one array back.
	w.send(`[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","id":11,"method":"tools/list"}]`)
	b, ok := w.recv()["batch"].([]any)
	if !ok || len(b) != 2 || b[0].(map[string]any)["id"] != 10.0 || b[1].(map[string]any)["id"] != 11.0 {
		t.Fatalf("batch reply %v", b)
	}
	// Still serving.
	w.send(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"s":"alive"}}}`)
	r := w.recv()
	if r["id"] != 12.0 || !strings.Contains(mustJSON(r["result"]), "alive") {
		t.Fatalf("after the bad frames: %v", r)
	}
}

// TestNoBatchesInNewRevisions: a session on 2025-06-18 or later has no
// batches; one is answered with errors, not the end of the session.
func TestNoBatchesInNewRevisions(t *testing.T) {
	w := serveOnPipes(t, 1<<20)
	w.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	w.recv()
	w.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	w.send(`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`)
	if code, msg := errorOf(t, w.recv()); code != -32600 || !strings.Contains(msg, "batches are not part of MCP 2025-06-18") {
		t.Fatalf("batch on 2025-11-25: %v %q", code, msg)
	}
	w.send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	if r := w.recv(); r["id"] != 6.0 || r["error"] != nil {
		t.Fatalf("ping after: %v", r)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestIDSniffer(t *testing.T) {
	for _, c := range []struct {
		in   string
		want any
	}{
		{`{"id":1}`, 1.0},
		{`{"id": -2.5e1 , "x":1}`, -25.0},
		{`{"id":"a\"b"}`, `a"b`},
		{`{"params":{"id":"inner"},"id":"outer"}`, "outer"},
		{`{"params":["id",{"id":3}],"method":"x"}`, nil},
		{`{"a":"id","b":"\"id\":4"}`, nil},
		{`{"id":{"x":1},"y":2}`, nil},
		{`{"id":null}`, nil},
		{`{"idx":5}`, nil},
		{`[{"id":1}]`, nil},
		{`{"id":7`, 7.0},
	} {
		for _, split := range []int{1, 3, 1000} { // fed in pieces of this size
			var s idSniffer
			for i := 0; i < len(c.in); i += split {
				s.feed([]byte(c.in[i:min(i+split, len(c.in))]))
			}
			if got := s.id(); got != c.want {
				t.Errorf("%s (pieces of %d): id %v, want %v", c.in, split, got, c.want)
			}
		}
	}
}

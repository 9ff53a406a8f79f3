package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk decodes tools/call params into a struct without the Tasks
// "task" field, so a task-augmented call would arrive as a plain one. The
// wire layer moves "task" into the params' _meta (under taskMetaKey), where
// the task middleware finds it, before the SDK decodes the message: in the
// connection for stdio and in-memory transports (TaskTransport), in the
// request body for Streamable HTTP (TaskHTTPHandler). Nothing else in a
// message is touched.

// liftTask rewrites a tools/call's params when they hold "task"; ok is
// false (and params are returned as they are) otherwise.
func liftTask(params json.RawMessage) (json.RawMessage, bool) {
	if !bytes.Contains(params, []byte(`"task"`)) {
		return params, false
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params, false
	}
	spec, ok := p["task"]
	if !ok {
		return params, false
	}
	var meta map[string]json.RawMessage
	if m, ok := p["_meta"]; ok && json.Unmarshal(m, &meta) != nil {
		return params, false
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	if bytes.Equal(bytes.TrimSpace(spec), []byte("null")) {
		spec = json.RawMessage("{}")
	}
	meta[taskMetaKey] = spec
	delete(p, "task")
	m, err := json.Marshal(meta)
	if err != nil {
		return params, false
	}
	p["_meta"] = m
	out, err := json.Marshal(p)
	if err != nil {
		return params, false
	}
	return out, true
}

// TaskTransport wraps a transport (stdio, in-memory) so task-augmented
// calls reach the task middleware.
func TaskTransport(t mcp.Transport) mcp.Transport { return &taskTransport{t} }

type taskTransport struct{ mcp.Transport }

func (t *taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &taskConn{c}, nil
}

type taskConn struct{ mcp.Connection }

func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "tools/call" {
		req.Params, _ = liftTask(req.Params)
	}
	return msg, err
}

// TaskHTTPHandler wraps a Streamable HTTP handler so task-augmented calls
// reach the task middleware. limit bounds the body it reads (the SDK's own
// limit still applies to what it passes on).
func TaskHTTPHandler(h http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil || int64(len(body)) > limit {
			// Let the SDK see (and reject) what was sent.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
			h.ServeHTTP(w, r)
			return
		}
		if bytes.Contains(body, []byte(`"task"`)) {
			var msg struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
				if params, ok := liftTask(msg.Params); ok {
					var full map[string]json.RawMessage
					if json.Unmarshal(body, &full) == nil {
						full["params"] = params
						if b, err := json.Marshal(full); err == nil {
							body = b
						}
					}
				}
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		h.ServeHTTP(w, r)
	})
}

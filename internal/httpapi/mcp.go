package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/mcpserver"
)

// statelessFrom is the first MCP revision without sessions (SEP-2575).
const statelessFrom = "2026-07-28"

// mcpHandler serves MCP over Streamable HTTP for both generations of
// clients. The go-sdk handles each with a different handler: a stateful one
// (Mcp-Session-Id, initialize, standalone GET stream; 2025-06-18 and
// 2025-11-25 clients) rejects 2026-07-28 requests, and 2026-07-28 requests
// are accepted only by a Stateless one. One handler cannot do both, so this
// routes on the MCP-Protocol-Version header, which the 2026-07-28 revision
// requires on every request (the SDK answers a missing one with a header
// mismatch error): 2026-07-28 and later go to the stateless handler, the
// rest (including an initialize, which carries no header yet) to the
// stateful one. Both serve the same *mcp.Server, so the tools are the same.
//
// Both keep the SDK's DNS-rebinding protection on, stream responses as SSE
// (never JSONResponse, which would lose in-request progress notifications),
// bound request bodies like the REST API does, and close idle sessions
// after SessionTimeout. Stateless requests propagate the POST's
// cancellation to the tool call, which kills the run's process tree.
func (s *Server) mcpHandler() http.Handler {
	get := func(*http.Request) *mcp.Server { return s.mcp }
	stateful := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Logger:              s.log,
		SessionTimeout:      s.opts.SessionTimeout,
		MaxRequestBodyBytes: s.batchBodyLimit,
	})
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		Logger:                       s.log,
		MaxRequestBodyBytes:          s.batchBodyLimit,
		PropagateRequestCancellation: true,
	})
	// TaskHTTPHandler: task-augmented tools/call (MCP Tasks, mcpserver/tasks.go).
	local := mcpserver.TaskHTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= statelessFrom && r.Header.Get("Mcp-Session-Id") == "" {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	}), s.batchBodyLimit)
	routed := local
	if s.opts.Router != nil {
		routed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && s.opts.Router.Forward(w, r, sid, sessionGone) {
				return // another replica's session
			}
			local.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			ew := &rpcErrorWriter{ResponseWriter: w, limit: s.batchBodyLimit}
			defer ew.finish()
			w = ew
		}
		routed.ServeHTTP(w, r)
	})
}

// NodeHeader names the replica that answered a request (replica sets only).
const NodeHeader = "X-Pyexec-Node"

// sessionGone is the answer for a session whose replica is gone: 404, on
// which the protocol has the client initialize a new session.
func sessionGone(w http.ResponseWriter) {
	http.Error(w, "session not found: the replica that created this MCP session is gone; initialize a new session", http.StatusNotFound)
}

// rpcErrorWriter turns the SDK's plain-text answers to a body it cannot
// use (400 "malformed payload: ...", 413 "request body exceeds N bytes")
// into JSON-RPC error responses, as the stdio transport answers the same
// frames: -32700 for what is not JSON, -32600 for an invalid message or one
// over the size limit, with the limit named. Other responses pass through.
type rpcErrorWriter struct {
	http.ResponseWriter
	limit   int64
	status  int
	capture bool
	text    bytes.Buffer
}

func (w *rpcErrorWriter) WriteHeader(code int) {
	if (code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge) && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.capture, w.status = true, code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rpcErrorWriter) Write(p []byte) (int, error) {
	if w.capture {
		if w.text.Len() < 4096 {
			w.text.Write(p)
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *rpcErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *rpcErrorWriter) finish() {
	if !w.capture {
		return
	}
	msg := strings.TrimSpace(w.text.String())
	code := int64(jsonrpc.CodeInvalidRequest)
	switch {
	case w.status == http.StatusRequestEntityTooLarge:
		msg = fmt.Sprintf("Request too large: the largest request this server reads is %s (inline code %s, stdin %s, args and env_vars %s each). Put large data in a workspace file and pass its path",
			engine.FormatBytes(w.limit), engine.FormatBytes(engine.DefaultCodeLimit), engine.FormatBytes(engine.MaxStdinBytes), engine.FormatBytes(engine.MaxArgsBytes))
	case strings.Contains(msg, "invalid character") || strings.Contains(msg, "unexpected end of JSON"):
		code = jsonrpc.CodeParseError
		msg = "Parse error: the body is not valid JSON (" + msg + ")"
	default:
		msg = "Invalid request: " + msg
	}
	h := w.Header()
	h.Del("X-Content-Type-Options")
	h.Set("Content-Type", "application/json")
	w.ResponseWriter.WriteHeader(w.status)
	_ = json.NewEncoder(w.ResponseWriter).Encode(wireError{JSONRPC: "2.0", ID: nil, Error: &jsonrpc.Error{Code: code, Message: msg}})
}

// wireError is a JSON-RPC error response whose request id is unknown.
type wireError struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      any            `json:"id"`
	Error   *jsonrpc.Error `json:"error"`
}

// closeMCPSessions ends every MCP session (used at shutdown, after running
// calls had their grace period: standalone GET streams would otherwise hold
// connections open forever).
func (s *Server) closeMCPSessions() {
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
}

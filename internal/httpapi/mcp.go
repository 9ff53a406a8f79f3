package httpapi

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	if s.opts.Router == nil {
		return local
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && s.opts.Router.Forward(w, r, sid, sessionGone) {
			return // another replica's session
		}
		local.ServeHTTP(w, r)
	})
}

// NodeHeader names the replica that answered a request (replica sets only).
const NodeHeader = "X-Pyexec-Node"

// sessionGone is the answer for a session whose replica is gone: 404, on
// which the protocol has the client initialize a new session.
func sessionGone(w http.ResponseWriter) {
	http.Error(w, "session not found: the replica that created this MCP session is gone; initialize a new session", http.StatusNotFound)
}

// closeMCPSessions ends every MCP session (used at shutdown, after running
// calls had their grace period: standalone GET streams would otherwise hold
// connections open forever).
func (s *Server) closeMCPSessions() {
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
}

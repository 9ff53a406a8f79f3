package cluster

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

var sqlErrNoRows = sql.ErrNoRows

// RoutedHeader marks a request one replica forwarded to another, so a
// stale view can never bounce a request between replicas.
const RoutedHeader = "X-Pyexec-Routed-By"

const routedHeader = RoutedHeader

// Router sends requests that belong to one node to that node. What
// belongs to a node is named by an id minted with NewID: the node's id,
// a dot, then random hex; MCP session ids are minted so and routed
// through Forward. Live Python sessions have names users choose, so their
// owner is recorded in the job store instead, and httpapi forwards their
// calls to Addr of that owner; either way any replica takes any request.
type Router struct {
	m   *Membership
	log *slog.Logger
	// proxies are kept per target so connections to a peer are reused.
	tr http.RoundTripper
}

// NewRouter routes through m's view of the live nodes.
func NewRouter(m *Membership, logger *slog.Logger) *Router {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // peers are addressed directly
	tr.MaxIdleConnsPerHost = 64
	return &Router{m: m, log: logger.With("component", "router"), tr: tr}
}

// NodeID is the local node's id.
func (r *Router) NodeID() string { return r.m.NodeID() }

// Addr returns the base URL of a live node; ok is false when the node is
// unknown or silent past the bound.
func (r *Router) Addr(ctx context.Context, nodeID string) (addr string, ok bool, err error) {
	return r.m.Addr(ctx, nodeID)
}

// NewID mints an id owned by this node.
func (r *Router) NewID() string {
	var b [16]byte
	rand.Read(b[:])
	return r.m.NodeID() + "." + hex.EncodeToString(b[:])
}

// Owner returns the node an id minted by NewID belongs to ("" for an id
// that names no node).
func Owner(id string) string {
	node, _, ok := strings.Cut(id, ".")
	if !ok {
		return ""
	}
	return node
}

// Forward serves req on the node owning id: it returns false when that is
// this node (the caller serves it); otherwise it proxies the request (SSE
// streams included) to the owner, or answers 404 when the owner is gone,
// and returns true. gone writes the 404 body the protocol expects.
func (r *Router) Forward(w http.ResponseWriter, req *http.Request, id string, gone func(http.ResponseWriter)) bool {
	node := Owner(id)
	if node == "" || node == r.m.NodeID() {
		return false
	}
	if by := req.Header.Get(routedHeader); by != "" {
		// Forwarded to us, but not ours: the sender's view is stale.
		r.log.Warn("a forwarded request names another node", "id", id, "from", by)
		gone(w)
		return true
	}
	addr, ok, err := r.m.Addr(req.Context(), node)
	if err != nil {
		http.Error(w, fmt.Sprintf("cannot look up the replica owning %s: %v", id, err), http.StatusServiceUnavailable)
		return true
	}
	if !ok {
		gone(w)
		return true
	}
	target, err := url.Parse(addr)
	if err != nil || target.Host == "" {
		http.Error(w, fmt.Sprintf("replica %s advertises an invalid address %q", node, addr), http.StatusBadGateway)
		return true
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(routedHeader, r.m.NodeID())
			pr.Out.Header.Del("X-Forwarded-For")
		},
		Transport:     r.tr,
		FlushInterval: -1, // SSE: every event at once
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			r.log.Warn("forwarding to the owning replica failed", "node", node, "addr", addr, "err", err)
			gone(w)
		},
	}
	p.ServeHTTP(w, req)
	return true
}

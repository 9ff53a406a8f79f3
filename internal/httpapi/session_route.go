package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/pyexec/pyexec/internal/cluster"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/session"
)

// Sessions across replicas: a session lives in one replica's process, and
// the job store records which (session.Store). Any replica answers any
// session call (REST, and MCP whether the client is stateless or holds an
// MCP session on another replica): a session held elsewhere is served by
// calling its owner's REST API with this server's Client, at the owner's
// advertised address and with the token the replicas share. The owner's
// answer is the answer, errors included; a long cell's job id is readable
// from any replica (the job store is shared), a cancelled call cancels the
// forwarded one (the cell gets KeyboardInterrupt on the owner), and an
// owner that stopped heartbeating has its sessions recorded lost
// (node_lost), so the next call gets that error once, never a silently new
// session.

// SessionRouting is what a replica needs to route session calls.
type SessionRouting struct {
	// Owner names the replica holding a session when it is not this one
	// (session.Manager.Owner).
	Owner func(ctx context.Context, name string) (string, error)
	// NodeGone records the sessions of a replica that left as lost
	// (session.Manager.MarkNodeLost).
	NodeGone func(ctx context.Context, nodes []string) (int, error)
}

// routedSessions is the server's SessionExecutor on a replica.
type routedSessions struct {
	executor.SessionExecutor // this replica's sessions
	rt                       SessionRouting
	router                   *cluster.Router
	token                    string

	mu    sync.Mutex
	peers map[string]*Client
}

type routedKey struct{}

// forwarded marks a request another replica sent here: it is served here
// or refused, never sent on (a stale view cannot bounce it around).
func forwarded(r *http.Request) *http.Request {
	if r.Header.Get(cluster.RoutedHeader) == "" {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), routedKey{}, true))
}

func (rs *routedSessions) peer(addr string) (*Client, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if c, ok := rs.peers[addr]; ok {
		return c, nil
	}
	c, err := NewClient(addr, ClientOptions{Token: rs.token, Header: http.Header{cluster.RoutedHeader: {rs.router.NodeID()}}})
	if err != nil {
		return nil, err
	}
	if len(rs.peers) > 256 {
		clear(rs.peers)
	}
	rs.peers[addr] = c
	return c, nil
}

// target is the Client of the replica holding name, or nil to serve the
// call here.
func (rs *routedSessions) target(ctx context.Context, name, owner string) (*Client, error) {
	if owner == "" {
		var err error
		if owner, err = rs.rt.Owner(ctx, name); err != nil || owner == "" {
			return nil, err
		}
	}
	if ctx.Value(routedKey{}) != nil {
		return nil, fmt.Errorf("session %q is held by replica %s, and this replica (%s) was reached through another one: the replica set's view changed meanwhile; try again", name, owner, rs.router.NodeID())
	}
	addr, ok, err := rs.router.Addr(ctx, owner)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Silent past the bound: its sessions are lost. Served here, the
		// call then reports that once.
		if _, err := rs.rt.NodeGone(ctx, []string{owner}); err != nil {
			return nil, fmt.Errorf("session %q: its replica %s is gone, and recording that failed: %w", name, owner, err)
		}
		return nil, nil
	}
	return rs.peer(addr)
}

// routed serves a call on session name here or on its owner.
func routed[T any](ctx context.Context, rs *routedSessions, name string, here func(executor.SessionExecutor) (T, error), there func(*Client) (T, error)) (T, error) {
	var zero T
	c, err := rs.target(ctx, name, "")
	if err != nil {
		return zero, err
	}
	if c != nil {
		v, err := there(c)
		return v, rs.peerError(ctx, name, c, err)
	}
	v, err := here(rs.SessionExecutor)
	var ee *session.ElsewhereError
	if !errors.As(err, &ee) {
		return v, err
	}
	// Another replica claimed the name first (a race on creation).
	if c, err = rs.target(ctx, name, ee.Owner); err != nil {
		return zero, err
	}
	if c == nil {
		return here(rs.SessionExecutor)
	}
	v, err = there(c)
	return v, rs.peerError(ctx, name, c, err)
}

// peerError is the holder's refusal as this replica would give it (its
// status and words), or, when the holder did not answer, an unavailable
// error saying so: the session is neither lost nor replaced until the
// holder is past the silence bound.
func (rs *routedSessions) peerError(ctx context.Context, name string, c *Client, err error) error {
	var re *RemoteError
	var se *session.Error
	var rq *engine.RequestError
	switch {
	case err == nil || ctx.Err() != nil || errors.As(err, &se) || errors.As(err, &rq):
		return err
	case errors.As(err, &re):
		status := http.StatusBadGateway
		if st, ok := codeStatus[re.Detail.Code]; ok {
			status = st
		}
		return &apiError{Status: status, Detail: re.Detail}
	}
	return newAPIError(http.StatusServiceUnavailable, CodeUnavailable,
		"session %q is held by the replica at %s, which did not answer (%v); if that replica died, its sessions are reported lost (node_lost) once it has been silent past --node-lost-after: retry then", name, c.URL(), err)
}

// SessionCreate implements executor.SessionExecutor.
func (rs *routedSessions) SessionCreate(ctx context.Context, req session.CreateRequest) (session.Info, error) {
	return routed(ctx, rs, req.Session,
		func(sx executor.SessionExecutor) (session.Info, error) { return sx.SessionCreate(ctx, req) },
		func(c *Client) (session.Info, error) { return c.SessionCreate(ctx, req) })
}

// SessionRun implements executor.SessionExecutor. Cancelling ctx cancels
// the forwarded call, which interrupts the cell on its owner.
func (rs *routedSessions) SessionRun(ctx context.Context, req session.RunRequest, p executor.ProgressFunc) (session.CellResult, error) {
	return routed(ctx, rs, req.Session,
		func(sx executor.SessionExecutor) (session.CellResult, error) { return sx.SessionRun(ctx, req, p) },
		func(c *Client) (session.CellResult, error) {
			if req.OnJob != nil {
				// An MCP task waits on a job of this replica; the cell's job
				// is on its owner, so the task waits for the forwarded call.
				req.OnJob = nil
			}
			return c.SessionRun(ctx, req, p)
		})
}

// SessionGet implements executor.SessionExecutor.
func (rs *routedSessions) SessionGet(ctx context.Context, name string) (session.Info, error) {
	return routed(ctx, rs, name,
		func(sx executor.SessionExecutor) (session.Info, error) { return sx.SessionGet(ctx, name) },
		func(c *Client) (session.Info, error) { return c.SessionGet(ctx, name) })
}

// SessionHistory implements executor.SessionExecutor.
func (rs *routedSessions) SessionHistory(ctx context.Context, name string) (session.History, error) {
	return routed(ctx, rs, name,
		func(sx executor.SessionExecutor) (session.History, error) { return sx.SessionHistory(ctx, name) },
		func(c *Client) (session.History, error) { return c.SessionHistory(ctx, name) })
}

// SessionClose implements executor.SessionExecutor.
func (rs *routedSessions) SessionClose(ctx context.Context, name string) (session.Info, error) {
	return routed(ctx, rs, name,
		func(sx executor.SessionExecutor) (session.Info, error) { return sx.SessionClose(ctx, name) },
		func(c *Client) (session.Info, error) { return c.SessionClose(ctx, name) })
}

// SessionReset implements executor.SessionExecutor.
func (rs *routedSessions) SessionReset(ctx context.Context, name string) (session.Info, error) {
	return routed(ctx, rs, name,
		func(sx executor.SessionExecutor) (session.Info, error) { return sx.SessionReset(ctx, name) },
		func(c *Client) (session.Info, error) { return c.SessionReset(ctx, name) })
}

// SessionInterrupt implements executor.SessionExecutor.
func (rs *routedSessions) SessionInterrupt(ctx context.Context, name string) (session.Info, error) {
	return routed(ctx, rs, name,
		func(sx executor.SessionExecutor) (session.Info, error) { return sx.SessionInterrupt(ctx, name) },
		func(c *Client) (session.Info, error) { return c.SessionInterrupt(ctx, name) })
}

// SessionExport implements executor.SessionExecutor: the notebook is
// written on the owner's workspace.
func (rs *routedSessions) SessionExport(ctx context.Context, name, path string) (executor.SessionExportResult, error) {
	return routed(ctx, rs, name,
		func(sx executor.SessionExecutor) (executor.SessionExportResult, error) {
			return sx.SessionExport(ctx, name, path)
		},
		func(c *Client) (executor.SessionExportResult, error) { return c.SessionExport(ctx, name, path) })
}

// codeStatus is the HTTP status of each error code, to pass a holder's
// refusal on as it was given.
var codeStatus = map[string]int{
	CodeInvalidRequest: http.StatusBadRequest, CodeUnauthorized: http.StatusUnauthorized, CodeForbidden: http.StatusForbidden,
	CodeNotFound: http.StatusNotFound, CodeMethodNotAllowed: http.StatusMethodNotAllowed, CodeConflict: http.StatusConflict,
	CodePayloadTooLarge: http.StatusRequestEntityTooLarge, CodeUnsupportedMedia: http.StatusUnsupportedMediaType,
	CodeBusy: http.StatusTooManyRequests, CodeInternal: http.StatusInternalServerError, CodeUnavailable: http.StatusServiceUnavailable,
	CodeStorageFull: http.StatusInsufficientStorage,
}

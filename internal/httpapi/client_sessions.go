package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/session"
)

// The client side of sessions: Client is an executor.SessionExecutor, so
// run_python session=..., session_create and the other session tools work
// on the execution server's sessions exactly as on local ones.

var _ executor.SessionExecutor = (*Client)(nil)

func sessionPath(name string, rest ...string) string {
	return "/v1/sessions/" + url.PathEscape(name) + strings.Join(rest, "")
}

// SessionCreate implements executor.SessionExecutor.
func (c *Client) SessionCreate(ctx context.Context, req session.CreateRequest) (session.Info, error) {
	var in session.Info
	err := c.jsonCall(ctx, http.MethodPost, "/v1/sessions", req, &in, time.Minute)
	return in, sessionError(c, err)
}

// SessionRun implements executor.SessionExecutor. The call may last the
// cell's timeout plus the interrupt grace.
func (c *Client) SessionRun(ctx context.Context, req session.RunRequest, progress executor.ProgressFunc) (session.CellResult, error) {
	var out session.CellResult
	wait := time.Duration(req.Timeout*float64(time.Second)) + time.Minute
	if req.Timeout <= 0 {
		wait = 15 * time.Minute // the server's default and cap apply there
	}
	err := c.jsonCall(ctx, http.MethodPost, sessionPath(req.Session, "/run"), SessionRunRequest{Code: req.Code, Timeout: req.Timeout, SyncBudget: req.SyncBudget, Async: req.Async, OutputBudget: req.OutputBudget, Settings: req.Settings}, &out, wait)
	return out, sessionError(c, err)
}

// SessionList implements executor.SessionExecutor.
func (c *Client) SessionList(ctx context.Context) ([]session.Info, error) {
	var l SessionList
	if err := c.jsonCall(ctx, http.MethodGet, "/v1/sessions", nil, &l, 0); err != nil {
		return nil, sessionError(c, err)
	}
	if l.Sessions == nil {
		l.Sessions = []session.Info{}
	}
	return l.Sessions, nil
}

// SessionGet implements executor.SessionExecutor.
func (c *Client) SessionGet(ctx context.Context, name string) (session.Info, error) {
	var in session.Info
	err := c.jsonCall(ctx, http.MethodGet, sessionPath(name), nil, &in, 0)
	return in, sessionError(c, err)
}

// SessionHistory implements executor.SessionExecutor.
func (c *Client) SessionHistory(ctx context.Context, name string) (session.History, error) {
	var h session.History
	err := c.jsonCall(ctx, http.MethodGet, sessionPath(name, "/history"), nil, &h, 0)
	return h, sessionError(c, err)
}

// SessionClose implements executor.SessionExecutor.
func (c *Client) SessionClose(ctx context.Context, name string) (session.Info, error) {
	var in session.Info
	err := c.jsonCall(ctx, http.MethodDelete, sessionPath(name), nil, &in, 30*time.Second)
	return in, sessionError(c, err)
}

// SessionReset implements executor.SessionExecutor.
func (c *Client) SessionReset(ctx context.Context, name string) (session.Info, error) {
	var in session.Info
	err := c.jsonCall(ctx, http.MethodPost, sessionPath(name, "/reset"), struct{}{}, &in, time.Minute)
	return in, sessionError(c, err)
}

// SessionInterrupt implements executor.SessionExecutor.
func (c *Client) SessionInterrupt(ctx context.Context, name string) (session.Info, error) {
	var in session.Info
	err := c.jsonCall(ctx, http.MethodPost, sessionPath(name, "/interrupt"), struct{}{}, &in, 0)
	return in, sessionError(c, err)
}

// SessionExport implements executor.SessionExecutor.
func (c *Client) SessionExport(ctx context.Context, name, path string) (executor.SessionExportResult, error) {
	var out executor.SessionExportResult
	err := c.jsonCall(ctx, http.MethodPost, sessionPath(name, "/export"), SessionExportRequest{Path: path}, &out, time.Minute)
	return out, sessionError(c, err)
}

// sessionError turns the server's refusal back into the *session.Error the
// local executor returns, so both read the same.
func sessionError(c *Client, err error) error {
	var re *RemoteError
	if !errors.As(err, &re) {
		return err
	}
	switch {
	case re.Detail.SessionError != "":
		return &session.Error{Kind: re.Detail.SessionError, Session: "", Reason: re.Detail.LostReason, Message: re.Detail.Message}
	case re.Detail.Code == CodeNotFound && strings.HasPrefix(re.Detail.Message, "no route"):
		return fmt.Errorf("execution server at %s keeps no sessions (an older pyexec, or sessions are off there)", re.URL)
	}
	return err
}

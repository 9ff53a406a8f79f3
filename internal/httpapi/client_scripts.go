package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/scripts"
)

// The client side of saved and autosaved scripts: Client is an
// executor.Scripts, so save_script, list_scripts, view_script, script_name
// and autosave work on the execution server's store exactly as on a local
// one.

var _ executor.Scripts = (*Client)(nil)

// clientAutosaveQueue is how many autosaves may wait to be sent; a burst
// beyond it drops autosaves rather than slowing runs (as the local store).
const clientAutosaveQueue = 64

// SaveScript implements executor.Scripts.
func (c *Client) SaveScript(ctx context.Context, req scripts.SaveRequest) (scripts.Entry, error) {
	var e scripts.Entry
	err := c.jsonCall(ctx, http.MethodPost, "/v1/scripts", SaveScriptRequest{Name: req.Name, Code: req.Code, Dependencies: req.Dependencies, RequiresPython: req.RequiresPython, Overwrite: req.Overwrite}, &e, 0)
	return e, scriptError(err)
}

// ListScripts implements executor.Scripts.
func (c *Client) ListScripts(ctx context.Context, includeAutosaved bool) ([]scripts.Entry, error) {
	path := "/v1/scripts"
	if includeAutosaved {
		path += "?include_autosaved=true"
	}
	var l ScriptList
	if err := c.jsonCall(ctx, http.MethodGet, path, nil, &l, 0); err != nil {
		return nil, scriptError(err)
	}
	if l.Scripts == nil {
		l.Scripts = []scripts.Entry{}
	}
	return l.Scripts, nil
}

// ViewScript implements executor.Scripts.
func (c *Client) ViewScript(ctx context.Context, name string, autosaved bool) (scripts.Script, error) {
	path := "/v1/scripts/" + url.PathEscape(name)
	if autosaved {
		path += "?autosaved=true"
	}
	var sc scripts.Script
	err := c.jsonCall(ctx, http.MethodGet, path, nil, &sc, 0)
	return sc, scriptError(err)
}

// ScriptSource implements executor.Scripts.
func (c *Client) ScriptSource(ctx context.Context, name string) (string, error) {
	sc, err := c.ViewScript(ctx, name, false)
	if err != nil {
		return "", err
	}
	return sc.Source, nil
}

// RemoveOrphanedAutosaves implements executor.Scripts on the server, which
// knows its jobs.
func (c *Client) RemoveOrphanedAutosaves(ctx context.Context) (int, error) {
	var out struct {
		Removed int `json:"removed"`
	}
	c.FlushAutosaves(ctx)
	err := c.jsonCall(ctx, http.MethodPost, "/v1/autosaves/cleanup", struct{}{}, &out, 0)
	return out.Removed, scriptError(err)
}

// Autosave implements executor.Scripts: the record is queued and sent to
// the server in the background; a full queue drops it.
func (c *Client) Autosave(rec scripts.AutosaveRecord) {
	if rec.Code == "" || len(rec.Code) > scripts.MaxScriptBytes {
		return
	}
	var args map[string]any
	if b, err := json.Marshal(rec.Arguments); err == nil {
		_ = json.Unmarshal(b, &args)
	}
	c.autoOnce.Do(c.startAutosaver)
	select {
	case c.autoQueue <- autosaveItem{req: &AutosaveRequest{Tool: rec.Tool, Code: rec.Code, Arguments: args, JobID: rec.JobID}}:
	default:
		c.autoDropped.Add(1)
	}
}

// FlushAutosaves waits until the autosaves queued so far have been sent
// (tests; a front end about to exit).
func (c *Client) FlushAutosaves(ctx context.Context) {
	c.autoOnce.Do(c.startAutosaver)
	done := make(chan struct{})
	select {
	case c.autoQueue <- autosaveItem{flushed: done}:
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

type autosaveItem struct {
	req     *AutosaveRequest
	flushed chan struct{}
}

// autoState is Client's background autosave sender.
type autoState struct {
	autoQueue   chan autosaveItem
	autoDropped atomic.Int64
}

func (c *Client) startAutosaver() {
	c.autoQueue = make(chan autosaveItem, clientAutosaveQueue)
	go func() {
		for it := range c.autoQueue {
			if it.flushed != nil {
				close(it.flushed)
				continue
			}
			var out map[string]string
			if err := c.jsonCall(context.Background(), http.MethodPost, "/v1/autosaves", it.req, &out, 0); err != nil {
				c.autoDropped.Add(1)
			}
		}
	}()
}

// scriptError explains a server without script routes (started without a
// script store); a rejected request already reads as the local store's
// ("name: ..."), since invalid_request comes back as an engine.RequestError.
func scriptError(err error) error {
	var re *RemoteError
	if errors.As(err, &re) && re.Detail.Code == CodeNotFound && strings.HasPrefix(re.Detail.Message, "no route") {
		return fmt.Errorf("execution server at %s keeps no saved scripts (it runs without a script store)", re.URL)
	}
	return err
}

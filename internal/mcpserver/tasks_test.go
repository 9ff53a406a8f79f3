package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
)

// rawClient speaks JSON-RPC over an in-memory connection, the way a client
// with Tasks support does: the go-sdk client has no "task" field to send.
type rawClient struct {
	t    *testing.T
	conn mcp.Connection

	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan *jsonrpc.Response
	notes   []*jsonrpc.Request
}

func newRawClient(t *testing.T, protocol string) *rawClient {
	t.Helper()
	eng, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	lj, err := executor.OpenLocalJobs(context.Background(), executor.NewLocal(eng, "test", 4), jobs.Config{StateDir: eng.Config().StateDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lj.Close(context.Background()) })
	st, ct := mcp.NewInMemoryTransports()
	srv := New(lj, Options{Version: "test"})
	ss, err := srv.Connect(context.Background(), TaskTransport(st), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ct.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, conn: conn, waiting: map[int64]chan *jsonrpc.Response{}}
	go c.read()
	t.Cleanup(func() { conn.Close(); ss.Wait() })
	c.call("initialize", map[string]any{"protocolVersion": protocol, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
	c.conn.Write(context.Background(), &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
	return c
}

func (c *rawClient) read() {
	for {
		msg, err := c.conn.Read(context.Background())
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			id, _ := m.ID.Raw().(int64)
			c.mu.Lock()
			ch := c.waiting[id]
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		case *jsonrpc.Request:
			c.mu.Lock()
			c.notes = append(c.notes, m)
			c.mu.Unlock()
		}
	}
}

// call sends a request and returns its result object or its error.
func (c *rawClient) call(method string, params any) (map[string]any, *jsonrpc.Error) {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan *jsonrpc.Response, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	p, _ := json.Marshal(params)
	rid, _ := jsonrpc.MakeID(float64(id))
	if err := c.conn.Write(context.Background(), &jsonrpc.Request{ID: rid, Method: method, Params: p}); err != nil {
		c.t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			var je *jsonrpc.Error
			if e, ok := r.Error.(*jsonrpc.Error); ok {
				je = e
			} else {
				je = &jsonrpc.Error{Message: r.Error.Error()}
			}
			return nil, je
		}
		var m map[string]any
		json.Unmarshal(r.Result, &m)
		return m, nil
	case <-time.After(60 * time.Second):
		c.t.Fatalf("%s: no answer", method)
		return nil, nil
	}
}

func (c *rawClient) mustCall(method string, params any) map[string]any {
	c.t.Helper()
	m, err := c.call(method, params)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return m
}

func TestTasksLifecycle(t *testing.T) {
	c := newRawClient(t, "2025-11-25")
	tools := c.mustCall("tools/list", map[string]any{})["tools"].([]any)
	support := map[string]any{}
	for _, tl := range tools {
		m := tl.(map[string]any)
		support[m["name"].(string)] = m["execution"]
	}
	for _, name := range []string{"run_python", "run_python_batch", "benchmark_python"} {
		if fmt.Sprint(support[name]) != "map[taskSupport:optional]" {
			t.Errorf("%s execution = %v", name, support[name])
		}
	}
	if support["server_info"] != nil {
		t.Errorf("server_info execution = %v", support["server_info"])
	}

	// A batch as a task, with a progress token: progress carries the task.
	created := c.mustCall("tools/call", map[string]any{"name": "run_python_batch", "task": map[string]any{"ttl": 60000},
		"arguments": map[string]any{"codes": []string{"import time; time.sleep(1.2); print(1)", "print(2)"}}, "_meta": map[string]any{"progressToken": "p1"}})
	tk := created["task"].(map[string]any)
	id := tk["taskId"].(string)
	if tk["status"] != "working" || tk["ttl"] != float64(60000) || len(id) != 32 || tk["createdAt"] == "" || tk["pollInterval"] == nil {
		t.Fatalf("created: %v", created)
	}
	res := c.mustCall("tasks/result", map[string]any{"taskId": id}) // waits
	sc := res["structuredContent"].(map[string]any)["results"].([]any)
	if len(sc) != 2 || sc[1].(map[string]any)["stdout"] != "2\n" {
		t.Fatalf("batch result: %v", res)
	}
	if rt := res["_meta"].(map[string]any)[relatedTaskKey].(map[string]any)["taskId"]; rt != id {
		t.Errorf("related-task in tasks/result: %v", res["_meta"])
	}
	got := c.mustCall("tasks/get", map[string]any{"taskId": id})
	if got["status"] != "completed" || got["lastUpdatedAt"] == got["createdAt"] {
		t.Errorf("tasks/get: %v", got)
	}
	c.mu.Lock()
	var related int
	for _, n := range c.notes {
		if n.Method == "notifications/progress" && strings.Contains(string(n.Params), id) {
			related++
		}
	}
	c.mu.Unlock()
	if related == 0 {
		t.Errorf("no progress notification with the task's id")
	}

	// A rejected call is a failed task whose result is the tool error.
	bad := c.mustCall("tools/call", map[string]any{"name": "run_python", "task": map[string]any{}, "arguments": map[string]any{"code": "x", "script_path": "y.py"}})
	bid := bad["task"].(map[string]any)["taskId"].(string)
	res = c.mustCall("tasks/result", map[string]any{"taskId": bid})
	if res["isError"] != true {
		t.Errorf("rejected call's result: %v", res)
	}
	if g := c.mustCall("tasks/get", map[string]any{"taskId": bid}); g["status"] != "failed" || !strings.Contains(fmt.Sprint(g["statusMessage"]), "code") {
		t.Errorf("rejected call's task: %v", g)
	}

	// Errors the protocol names.
	if _, err := c.call("tasks/get", map[string]any{"taskId": "nope"}); err == nil || err.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown task: %v", err)
	}
	if _, err := c.call("tasks/cancel", map[string]any{"taskId": id}); err == nil || err.Code != jsonrpc.CodeInvalidParams || !strings.Contains(err.Message, "completed") {
		t.Errorf("cancel of a completed task: %v", err)
	}
	if _, err := c.call("tools/call", map[string]any{"name": "server_info", "task": map[string]any{}, "arguments": map[string]any{}}); err == nil || err.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("task for a tool without task support: %v", err)
	}
	if _, err := c.call("tasks/list", map[string]any{"cursor": "bogus"}); err == nil || err.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("bad cursor: %v", err)
	}
	list := c.mustCall("tasks/list", map[string]any{})["tasks"].([]any)
	if len(list) != 2 || list[0].(map[string]any)["taskId"] != bid {
		t.Errorf("tasks/list (newest first): %v", list)
	}
}

// A task whose TTL ends is deleted; a running one is cancelled first, and
// its job with it.
func TestTaskTTL(t *testing.T) {
	c := newRawClient(t, "2025-11-25")
	created := c.mustCall("tools/call", map[string]any{"name": "run_python", "task": map[string]any{"ttl": 1000},
		"arguments": map[string]any{"code": "import time\nprint('up', flush=True)\ntime.sleep(120)"}})
	id := created["task"].(map[string]any)["taskId"].(string)
	if created["task"].(map[string]any)["ttl"] != float64(1000) {
		t.Fatalf("ttl: %v", created)
	}
	var jobID string
	deadline := time.Now().Add(20 * time.Second)
	for {
		g, err := c.call("tasks/get", map[string]any{"taskId": id})
		if err != nil {
			if err.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("tasks/get after the ttl: %v", err)
			}
			break
		}
		if j, ok := g["_meta"].(map[string]any)[jobIDMetaKey].(string); ok {
			jobID = j
		}
		if time.Now().After(deadline) {
			t.Fatalf("task still there 20 s after its 1 s ttl: %v", g)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if jobID == "" {
		// The ttl may have run out before the first tasks/get on a loaded
		// machine; the server is this test's own, so its one job is the task's.
		res := c.mustCall("tools/call", map[string]any{"name": "list_jobs", "arguments": map[string]any{}})
		list := res["structuredContent"].(map[string]any)["jobs"].([]any)
		if len(list) != 1 {
			t.Fatalf("the server ran %d jobs, want the task's one: %v", len(list), list)
		}
		jobID = list[0].(map[string]any)["job_id"].(string)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		res := c.mustCall("tools/call", map[string]any{"name": "get_job", "arguments": map[string]any{"job_id": jobID}})
		st := res["structuredContent"].(map[string]any)["status"]
		if st == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the expired task's job is %v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Sessions of revisions before Tasks see execution.taskSupport too (an
// unknown field to them); only 2026-07-28 sessions, where Tasks is an
// extension with another wire shape, are not offered it.
func TestTasksForOlderSessions(t *testing.T) {
	c := newRawClient(t, "2025-06-18")
	tools := c.mustCall("tools/list", map[string]any{})["tools"].([]any)
	for _, tl := range tools {
		if tl.(map[string]any)["name"] == "run_python" && tl.(map[string]any)["execution"] == nil {
			t.Errorf("2025-06-18 sessions see no execution on run_python")
		}
	}
}

package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
)

// MCP Tasks (protocol 2025-11-25, experimental there): a tools/call with a
// "task" field returns a task at once and runs in the background; the
// client polls tasks/get, fetches the result with tasks/result (which
// waits), lists with tasks/list and stops with tasks/cancel.
//
// The go-sdk (v1.8) has no Tasks support, so it is built here on what the
// SDK offers: the wire layer (tasks_wire.go) moves a request's "task" into
// its _meta (the SDK drops fields it does not know), a receiving middleware
// turns such a tools/call into a task and runs the real call, through the
// rest of the SDK's chain (argument validation, the tool handler, structured
// output), on a context of its own; tasks/* are custom methods; and the
// middleware adds the tasks capability to initialize and
// execution.taskSupport to tools/list.
//
// The task is the job: run_python's task runs as a background job that is
// kept (get_job, list_jobs and job:// see it; its id is in the task's
// _meta), its progress and status message are the job's, cancelling the task
// cancels the job and kills its process tree, and tasks/result is the wait
// for the job's end. A batch or benchmark task is one call running the same
// way. Tasks live in this server's memory (their jobs persist); they are
// deleted, and a running one cancelled, when their TTL ends. Task ids are
// 128 random bits; every client of this server (all holders of its token)
// may see every task, as with list_jobs.

const (
	// taskMetaKey is where the wire layer puts a request's "task" field.
	taskMetaKey    = "io.github.pyexec/task"
	relatedTaskKey = "io.modelcontextprotocol/related-task"
	immediateKey   = "io.modelcontextprotocol/model-immediate-response"
	jobIDMetaKey   = "io.github.pyexec/job_id"

	// DefaultTaskTTL is a task's lifetime when the client asks none;
	// MaxTaskTTL caps what it may ask.
	DefaultTaskTTL = time.Hour
	MaxTaskTTL     = 24 * time.Hour
	minTaskTTL     = time.Second
	taskPoll       = time.Second // pollInterval suggested to clients
	taskListPage   = 50
	maxTasks       = 1000 // beyond it, new task-augmented calls are refused
	cancelWait     = 20 * time.Second

	// statelessProtocol is the first revision where Tasks moved to an
	// extension with another wire shape, which is not offered.
	statelessProtocol = "2026-07-28"
)

// Task statuses.
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// task is one task-augmented call.
type task struct {
	id      string
	tool    string
	created time.Time
	ttl     time.Duration

	mu      sync.Mutex
	status  string
	message string
	updated time.Time
	jobID   string
	result  json.RawMessage // the CallToolResult, once done
	rpcErr  *jsonrpc.Error  // or the JSON-RPC error the call ended with
	cancel  context.CancelFunc

	done     chan struct{} // closed when the status is terminal
	finished chan struct{} // closed when the call itself has returned
}

// taskStore holds a server's tasks.
type taskStore struct {
	tools map[string]bool // tools that accept task-augmented calls
	now   func() time.Time
	// cancelJob cancels a task's job directly (the executor's cancel, which
	// kills the tree and returns once it is dead), local or remote; nil
	// without jobs.
	cancelJob func(ctx context.Context, id string) error

	mu    sync.Mutex
	tasks map[string]*task
	order []string // ids, oldest first
}

func newTaskStore() *taskStore {
	return &taskStore{tools: map[string]bool{}, now: time.Now, tasks: map[string]*task{}}
}

// allow marks a tool as accepting task-augmented calls
// (execution.taskSupport "optional"). The seam for session cells: the tool
// that runs a cell registers itself here.
func (s *taskStore) allow(tool string) { s.tools[tool] = true }

type taskKey struct{}

// taskFrom is the task a tool call runs for, or nil.
func taskFrom(ctx context.Context) *task {
	tk, _ := ctx.Value(taskKey{}).(*task)
	return tk
}

// taskSyncOptions makes a task's run_python a job that is kept and never
// handed off: the task is the wait for it.
func taskSyncOptions(ctx context.Context, o executor.SyncOptions) executor.SyncOptions {
	if tk := taskFrom(ctx); tk != nil {
		o.Budget, o.Keep, o.OnJob = 0, true, func(j jobs.Job) { tk.setJob(j.ID) }
	}
	return o
}

func (tk *task) setJob(id string) {
	tk.mu.Lock()
	tk.jobID = id
	tk.mu.Unlock()
}

func (tk *task) progressed(msg string) {
	tk.mu.Lock()
	if tk.status == taskWorking && msg != "" {
		tk.message = msg
	}
	tk.mu.Unlock()
}

func (tk *task) relatedMeta() mcp.Meta {
	return mcp.Meta{relatedTaskKey: map[string]any{"taskId": tk.id}}
}

// taskWire is the protocol's Task object.
type taskWire struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

func (tk *task) wire() (taskWire, mcp.Meta) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	w := taskWire{TaskID: tk.id, Status: tk.status, StatusMessage: tk.message,
		CreatedAt: tk.created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: tk.updated.UTC().Format(time.RFC3339Nano),
		TTL: tk.ttl.Milliseconds()}
	if tk.status == taskWorking {
		w.PollInterval = taskPoll.Milliseconds()
		if tk.jobID != "" && !strings.Contains(w.StatusMessage, tk.jobID) {
			w.StatusMessage = strings.TrimPrefix(w.StatusMessage+" · job "+tk.jobID, " · ")
		}
	}
	meta := mcp.Meta{"io.github.pyexec/tool": tk.tool}
	if tk.jobID != "" {
		meta[jobIDMetaKey] = tk.jobID
	}
	return w, meta
}

// finish records how the call ended, unless the task was cancelled first
// (a cancelled task stays cancelled).
func (tk *task) finish(now time.Time, res mcp.Result, err error) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.status != taskWorking {
		return
	}
	tk.updated = now
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		tk.rpcErr, tk.status, tk.message = rpcErr, taskFailed, rpcErr.Message
	case err != nil:
		tk.rpcErr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		tk.status, tk.message = taskFailed, err.Error()
	default:
		data, merr := json.Marshal(res)
		if merr != nil {
			tk.rpcErr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: merr.Error()}
			tk.status, tk.message = taskFailed, merr.Error()
			break
		}
		tk.result = data
		tk.status, tk.message = taskCompleted, "done: fetch the result with tasks/result"
		if cr, ok := res.(*mcp.CallToolResult); ok && cr.IsError {
			// The call was rejected (a bad field, a missing file): the
			// protocol calls such a task failed; the reason is the result.
			tk.status, tk.message = taskFailed, "the call was rejected: "+firstText(cr)
		}
	}
	close(tk.done)
}

func firstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// newTaskID is 128 random bits: no one can guess another client's task.
func newTaskID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sweep deletes tasks whose TTL has ended, cancelling running ones (their
// process trees are killed).
func (s *taskStore) sweep() {
	now := s.now()
	s.mu.Lock()
	var expired []*task
	kept := s.order[:0]
	for _, id := range s.order {
		tk := s.tasks[id]
		if now.Sub(tk.created) >= tk.ttl {
			expired = append(expired, tk)
			delete(s.tasks, id)
			continue
		}
		kept = append(kept, id)
	}
	s.order = kept
	s.mu.Unlock()
	for _, tk := range expired {
		tk.cancel()
	}
}

func (s *taskStore) get(id string) (*task, error) {
	s.sweep()
	s.mu.Lock()
	defer s.mu.Unlock()
	tk := s.tasks[id]
	if tk == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Failed to retrieve task: no task %q (unknown, or deleted when its ttl ended)", id)}
	}
	return tk, nil
}

// middleware serves task-augmented tools/call and adds the tasks
// capability and the tools' execution.taskSupport to what the SDK answers.
func (s *taskStore) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			if ct, ok := req.(*mcp.CallToolRequest); ok && ct.Params != nil {
				if spec, ok := ct.Params.Meta[taskMetaKey]; ok {
					return s.start(ct, spec, next)
				}
			}
		case "initialize":
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && err == nil && ir.ProtocolVersion < statelessProtocol {
				return patched(ir, func(m map[string]any) {
					caps, _ := m["capabilities"].(map[string]any)
					if caps == nil {
						caps = map[string]any{}
						m["capabilities"] = caps
					}
					caps["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
						"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
				})
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			lr, ok := res.(*mcp.ListToolsResult)
			if !ok || err != nil || !oldProtocol(req) {
				return res, err
			}
			return patched(lr, func(m map[string]any) {
				tools, _ := m["tools"].([]any)
				for _, t := range tools {
					if tm, ok := t.(map[string]any); ok && s.tools[fmt.Sprint(tm["name"])] {
						tm["execution"] = map[string]any{"taskSupport": "optional"}
					}
				}
			})
		}
		return next(ctx, method, req)
	}
}

// oldProtocol reports whether the request's session speaks a revision with
// Tasks as the 2025-11-25 core feature.
func oldProtocol(req mcp.Request) bool {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion != "" && ip.ProtocolVersion < statelessProtocol
}

// start creates the task and runs the call in the background.
func (s *taskStore) start(req *mcp.CallToolRequest, spec any, next mcp.MethodHandler) (mcp.Result, error) {
	name := req.Params.Name
	if !s.tools[name] {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("tool %q does not support task-augmented calls (only %s do); call it without task", name, strings.Join(s.toolNames(), ", "))}
	}
	ttl := DefaultTaskTTL
	if m, ok := spec.(map[string]any); ok {
		if v, ok := m["ttl"].(float64); ok && v > 0 {
			// Capped before it is converted: a huge ttl is MaxTaskTTL, never
			// a wrapped value.
			ttl = max(engine.SecondsUpTo(v/1000, MaxTaskTTL), minTaskTTL)
		}
	}
	s.sweep()
	s.mu.Lock()
	if len(s.tasks) >= maxTasks {
		s.mu.Unlock()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server busy: %d tasks are held; cancel or let some expire", maxTasks)}
	}
	now := s.now()
	tk := &task{id: newTaskID(), tool: name, created: now, updated: now, ttl: ttl, status: taskWorking,
		message: "the call is running", done: make(chan struct{}), finished: make(chan struct{})}
	s.tasks[tk.id] = tk
	s.order = append(s.order, tk.id)
	s.mu.Unlock()

	delete(req.Params.Meta, taskMetaKey)
	// The call's own context: it outlives the tools/call request, ends on
	// tasks/cancel or the TTL, and carries no request id (so its progress
	// goes out on the session, not on a response stream already closed).
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), taskKey{}, tk))
	tk.cancel = cancel
	go func() {
		defer close(tk.finished)
		defer cancel()
		res, err := next(ctx, "tools/call", req)
		tk.finish(s.now(), res, err)
	}()

	w, meta := tk.wire()
	meta[immediateKey] = fmt.Sprintf("%s is running as task %s; its result will be available when it finishes.", name, tk.id)
	return &createTaskResult{ResultBase: mcp.ResultBase{Meta: meta}, Task: w}, nil
}

func (s *taskStore) toolNames() []string {
	var out []string
	for n := range s.tools {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Wire types of the tasks methods.

type createTaskResult struct {
	mcp.ResultBase
	Task taskWire `json:"task"`
}

type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type taskListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

type getTaskResult struct {
	mcp.ResultBase
	taskWire
}

type listTasksResult struct {
	mcp.ResultBase
	Tasks      []taskWire `json:"tasks"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// rawResult is a result whose JSON is given (the SDK's own result,
// amended).
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// patched re-encodes an SDK result with edit applied to its JSON object.
func patched(res mcp.Result, edit func(map[string]any)) (mcp.Result, error) {
	data, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	edit(m)
	if data, err = json.Marshal(m); err != nil {
		return nil, err
	}
	return &rawResult{raw: data}, nil
}

// register adds the tasks/* methods and the middleware to srv.
func (s *taskStore) register(srv *mcp.Server) {
	srv.AddReceivingMiddleware(s.middleware)
	must := func(err error) {
		if err != nil {
			panic(err) // only a name clash with a standard method, a programming error
		}
	}
	must(mcp.AddReceivingCustomMethod(srv, "tasks/get", func(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*getTaskResult, error) {
		tk, err := s.get(p.TaskID)
		if err != nil {
			return nil, err
		}
		w, meta := tk.wire()
		return &getTaskResult{ResultBase: mcp.ResultBase{Meta: meta}, taskWire: w}, nil
	}))
	must(mcp.AddReceivingCustomMethod(srv, "tasks/result", func(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*rawResult, error) {
		tk, err := s.get(p.TaskID)
		if err != nil {
			return nil, err
		}
		select {
		case <-tk.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		tk.mu.Lock()
		defer tk.mu.Unlock()
		if tk.rpcErr != nil {
			return nil, tk.rpcErr
		}
		if tk.result == nil { // cancelled before the call returned
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %s was cancelled; it has no result", tk.id)}
		}
		var m map[string]any
		if err := json.Unmarshal(tk.result, &m); err != nil {
			return nil, err
		}
		meta, _ := m["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta[relatedTaskKey] = map[string]any{"taskId": tk.id}
		m["_meta"] = meta
		data, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		return &rawResult{raw: data}, nil
	}))
	must(mcp.AddReceivingCustomMethod(srv, "tasks/list", func(ctx context.Context, _ *mcp.ServerSession, p *taskListParams) (*listTasksResult, error) {
		s.sweep()
		s.mu.Lock()
		ids := slices.Clone(s.order)
		s.mu.Unlock()
		slices.Reverse(ids) // newest first
		start := 0
		if p != nil && p.Cursor != "" {
			i := slices.Index(ids, p.Cursor)
			if i < 0 {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: the task it names is gone; list again from the start"}
			}
			start = i + 1
		}
		out := &listTasksResult{Tasks: []taskWire{}}
		for _, id := range ids[start:] {
			s.mu.Lock()
			tk := s.tasks[id]
			s.mu.Unlock()
			if tk == nil {
				continue
			}
			if len(out.Tasks) == taskListPage {
				out.NextCursor = out.Tasks[len(out.Tasks)-1].TaskID
				break
			}
			w, _ := tk.wire()
			out.Tasks = append(out.Tasks, w)
		}
		return out, nil
	}))
	must(mcp.AddReceivingCustomMethod(srv, "tasks/cancel", func(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*getTaskResult, error) {
		tk, err := s.get(p.TaskID)
		if err != nil {
			return nil, err
		}
		tk.mu.Lock()
		if tk.status != taskWorking {
			st := tk.status
			tk.mu.Unlock()
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", st)}
		}
		tk.status, tk.message, tk.updated = taskCancelled, "cancelled by request; its process tree was killed", s.now()
		close(tk.done)
		jobID := tk.jobID
		tk.mu.Unlock()
		if jobID != "" && s.cancelJob != nil {
			// The task is the job: cancel it where it runs (for a remote
			// executor, on the execution server) before the call's context.
			_ = s.cancelJob(ctx, jobID)
		}
		tk.cancel()
		// Answer once the call has returned: its run (the whole process
		// tree) is dead by then.
		select {
		case <-tk.finished:
		case <-time.After(cancelWait):
		}
		w, meta := tk.wire()
		return &getTaskResult{ResultBase: mcp.ResultBase{Meta: meta}, taskWire: w}, nil
	}))
}

// registerTasks enables task-augmented calls of the long-running tools that
// are registered.
func (t *tools) registerTasks(srv *mcp.Server, sets []string) {
	if !slices.Contains(sets, ToolsetCore) {
		return
	}
	t.tasks = newTaskStore()
	if t.jobs != nil {
		jx := t.jobs.ex
		t.tasks.cancelJob = func(ctx context.Context, id string) error { _, err := jx.Cancel(ctx, id); return err }
	}
	for _, name := range []string{"run_python", "run_python_batch", "benchmark_python"} {
		t.tasks.allow(name)
	}
	t.tasks.register(srv)
}

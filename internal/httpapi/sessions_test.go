package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/testutil/realpkg"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// sessionStep is one MCP call of the session suite; the steps run in order
// against one server, so later steps see what earlier ones left.
type sessionStep struct {
	name  string
	tool  string
	args  map[string]any
	check func(t *testing.T, r *mcp.CallToolResult, s map[string]any)
}

func wantCell(result string) func(*testing.T, *mcp.CallToolResult, map[string]any) {
	return func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
		t.Helper()
		wantOK(t, r)
		if s["result"] != result || s["session_status"] != "idle" || s["expires_at"] == nil {
			t.Fatalf("want result %q, got %v", result, s)
		}
	}
}

func sessionSuite() []sessionStep {
	return []sessionStep{
		{"create by run", "run_python", map[string]any{"session": "s1", "code": "x = 41\nprint('set')"},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["session_created"] != true || s["execution_count"] != 1.0 || s["stdout"] != "set\n" || s["success"] != true {
					t.Fatalf("structured %v", s)
				}
				if !strings.Contains(text(r), "session `s1` (created) · cell [1]") {
					t.Fatalf("text %q", text(r))
				}
			}},
		{"state persists", "run_python", map[string]any{"session": "s1", "code": "x += 1\nx"}, wantCell("42")},
		{"exception ends the cell", "run_python", map[string]any{"session": "s1", "code": "def f():\n    return 1/0\nf()"},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				e, _ := s["error"].(map[string]any)
				if s["success"] != false || e["ename"] != "ZeroDivisionError" || !strings.Contains(e["traceback"].(string), `File "<cell 3>", line 2, in f`) {
					t.Fatalf("structured %v", s)
				}
			}},
		{"namespace survives", "run_python", map[string]any{"session": "s1", "code": "x"}, wantCell("42")},
		{"a flood of output fits the result budget", "run_python", map[string]any{"session": "s1",
			"code": "for i in range(50000):\n    print('line %05d ' % i + 'x' * 90)\nprint('LAST LINE')\n'y' * 3_000_000"},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				whole, _ := json.Marshal(r)
				out, _ := s["stdout"].(string)
				res, _ := s["result"].(string)
				// The cell's job is kept, as a run's is: the marker and a link
				// point to its full output.
				id, _ := s["output_job_id"].(string)
				if len(whole) > 100_000 || !strings.Contains(out, "LAST LINE") || !strings.Contains(out, "cut here") || id == "" ||
					!strings.Contains(out, "job://"+id+"/output") || s["output_uri"] != "job://"+id+"/output" || len(res) > 20_000 || s["stdout_truncated"] != true {
					t.Fatalf("%d bytes of result; stdout %d bytes (%q...), result %d bytes", len(whole), len(out), out[:min(len(out), 200)], len(res))
				}
			}},
		{"settings fixed", "run_python", map[string]any{"session": "s1", "code": "1", "network": "deny"}, wantToolError("network: the session was created with")},
		{"bad name", "run_python", map[string]any{"session": "no/slash", "code": "1"}, wantToolError("session:")},
		{"args refused", "run_python", map[string]any{"session": "s1", "code": "1", "args": []string{"a"}}, wantToolError("args: cannot be combined with session")},
		{"timeout interrupts", "run_python", map[string]any{"session": "s1", "code": "import time\nprint('before', flush=True)\ntime.sleep(30)", "timeout": 0.5},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["timed_out"] != true || s["interrupted"] != true || s["stdout"] != "before\n" || s["session_status"] != "idle" {
					t.Fatalf("structured %v", s)
				}
			}},
		{"still alive", "run_python", map[string]any{"session": "s1", "code": "x * 2"}, wantCell("84")},
		{"list", "session_list", map[string]any{},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				l := s["sessions"].([]any)
				if len(l) != 1 || l[0].(map[string]any)["session"] != "s1" || l[0].(map[string]any)["execution_count"] != 7.0 {
					t.Fatalf("structured %v", s)
				}
			}},
		{"create existing", "session_create", map[string]any{"session": "s1"}, wantToolError(`session "s1" already exists`)},
		{"reset", "session_reset", map[string]any{"session": "s1"},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["execution_count"] != 0.0 || s["status"] != "idle" {
					t.Fatalf("structured %v", s)
				}
			}},
		{"fresh namespace", "run_python", map[string]any{"session": "s1", "code": "'x' in globals()"}, wantCell("False")},
		{"create with settings", "session_create", map[string]any{"session": "m", "label": "memory", "limits": map[string]any{"memory_bytes": 100 << 20}, "idle_timeout": 60},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["status"] != "idle" || s["label"] != "memory" {
					t.Fatalf("structured %v", s)
				}
			}},
		{"memory bomb costs the session", "run_python", map[string]any{"session": "m", "code": "b = bytearray(1 << 30)"},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["session_status"] != "lost" || s["lost_reason"] != "memory" || s["success"] != false {
					t.Fatalf("structured %v", s)
				}
			}},
		{"a bystander session", "run_python", map[string]any{"session": "b", "code": "y = 7"},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) { wantOK(t, r) }},
		// The corpus's fork bomb (testdata/hostile/fork_bomb.py) as a cell:
		// it costs its own session (the process limit stays full after the
		// interrupt), or, when every bomb process died with the interrupt,
		// the cell ends interrupted and the session is back to idle.
		{"fork bomb costs its session", "run_python", map[string]any{"session": "f", "limits": map[string]any{"max_procs": 64}, "timeout": 3,
			"code": "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)"},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				lost := s["session_status"] == "lost" && s["lost_reason"] == "processes"
				interrupted := s["session_status"] == "idle" && s["timed_out"] == true
				t.Logf("fork bomb: session %v, reason %v", s["session_status"], s["lost_reason"])
				if s["success"] != false || !(lost || interrupted) {
					t.Fatalf("structured %v", s)
				}
			}},
		{"the bystander is unharmed", "run_python", map[string]any{"session": "b", "code": "y"},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["result"] != "7" {
					t.Fatalf("structured %v", s)
				}
			}},
		{"sys.exit ends it", "run_python", map[string]any{"session": "e", "code": "import sys\nsys.exit(4)"},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["session_status"] != "closed" || s["exit_code"] != 4.0 {
					t.Fatalf("structured %v", s)
				}
			}},
		{"close", "session_close", map[string]any{"session": "s1"},
			func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["status"] != "closed" || s["execution_count"] != 1.0 || !strings.Contains(text(r), "**closed** session `s1` after 1 cells") {
					t.Fatalf("structured %v / %q", s, text(r))
				}
			}},
		{"closed is gone", "session_interrupt", map[string]any{"session": "s1"}, wantToolError(`no session named "s1"`)},
	}
}

// TestMCPSessionsLocalAndRemote runs the session suite through the
// in-process executor and through a remote execution server.
func TestMCPSessionsLocalAndRemote(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, withJobs(t, f.local(t, nil)), func(o *httpapi.Options) { o.Token = "tok" })
	remote, err := httpapi.NewClient(ts.URL, httpapi.ClientOptions{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	var lp, rp atomic.Int64
	for _, e := range []struct {
		name string
		cs   *mcp.ClientSession
	}{
		{"local", connectInMemory(t, withJobs(t, f.local(t, nil)), &lp)},
		{"remote", connectInMemory(t, remote, &rp)},
	} {
		t.Run(e.name, func(t *testing.T) {
			for _, st := range sessionSuite() {
				r, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: st.tool, Arguments: st.args})
				if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				var s map[string]any
				data, _ := json.Marshal(r.StructuredContent)
				_ = json.Unmarshal(data, &s)
				t.Run(st.name, func(t *testing.T) { st.check(t, r, s) })
			}
			testSessionBusyAndInterrupt(t, e.cs)
			testSessionResources(t, e.cs)
			testSessionLongCell(t, e.cs, f.workspace, e.name)
		})
	}
}

// A second call on a busy session is refused at once; session_interrupt
// stops the running cell and keeps the session.
func testSessionBusyAndInterrupt(t *testing.T, cs *mcp.ClientSession) {
	ctx := context.Background()
	call := func(tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var s map[string]any
		data, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(data, &s)
		return r, s
	}
	call("run_python", map[string]any{"session": "busy", "code": "kept = 7"})
	done := make(chan map[string]any, 1)
	go func() {
		_, s := call("run_python", map[string]any{"session": "busy", "code": "import time\nwhile True: time.sleep(0.01)", "timeout": 120})
		done <- s
	}()
	// The cell runs until interrupted: once the session says busy, it stays
	// busy until then.
	for {
		r, s := call("session_list", map[string]any{})
		if r.IsError {
			t.Fatal(text(r))
		}
		if l := s["sessions"].([]any); len(l) > 0 && l[len(l)-1].(map[string]any)["status"] == "busy" {
			break
		}
	}
	if r2, _ := call("run_python", map[string]any{"session": "busy", "code": "1"}); !r2.IsError || !strings.Contains(text(r2), "is busy running cell 2") {
		t.Fatalf("call on a busy session: %s", text(r2))
	}
	var cell map[string]any
	for cell == nil {
		if r, _ := call("session_interrupt", map[string]any{"session": "busy"}); r.IsError {
			t.Fatalf("interrupt: %s", text(r))
		}
		select {
		case cell = <-done:
		case <-time.After(100 * time.Millisecond): // the cell may not have reached Python yet: interrupt again
		}
	}
	if id, _ := cell["job_id"].(string); id != "" {
		// The interrupt came after the sync budget: the cell was a job by
		// then, and the job records the KeyboardInterrupt.
		j := waitJob(t, call, id)
		if !strings.Contains(j["stderr"].(string), "KeyboardInterrupt") {
			t.Fatalf("interrupted job-backed cell: %v", j)
		}
	} else if cell["interrupted"] != true || cell["session_status"] != "idle" {
		t.Fatalf("interrupted cell: %v", cell)
	}
	if _, s := call("run_python", map[string]any{"session": "busy", "code": "kept"}); s["result"] != "7" {
		t.Fatalf("after interrupt: %v", s)
	}
}

func testSessionResources(t *testing.T, cs *mcp.ClientSession) {
	ctx := context.Background()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "session://busy"})
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &info); err != nil || info["execution_count"] != 3.0 || info["status"] != "idle" || info["expires_at"] == nil {
		t.Fatalf("session://busy: %s (%v)", res.Contents[0].Text, err)
	}
	res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "session://busy/history"})
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Cells []struct {
			Code   string  `json:"code"`
			Result *string `json:"result"`
		} `json:"cells"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &h); err != nil || len(h.Cells) != 3 || h.Cells[2].Code != "kept" || *h.Cells[2].Result != "7" {
		t.Fatalf("history: %s (%v)", res.Contents[0].Text, err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "session://nope"}); err == nil {
		t.Fatal("an unknown session's resource was found")
	}
}

// The REST routes directly: create, run, conflict, close.
func TestSessionsREST(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), nil)
	r := do(t, http.MethodPost, ts.URL+"/v1/sessions", map[string]any{"session": "r1", "label": "rest"})
	if r.status != http.StatusCreated || r.header.Get("Location") != "/v1/sessions/r1" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = do(t, http.MethodPost, ts.URL+"/v1/sessions", map[string]any{"session": "r1"})
	if r.status != http.StatusConflict || r.errorBody(t).SessionError != "exists" {
		t.Fatalf("create twice: %d %s", r.status, r.body)
	}
	r = do(t, http.MethodPost, ts.URL+"/v1/sessions/r1/run", map[string]any{"code": "a = [1, 2]\nlen(a)"})
	var cell map[string]any
	r.json(t, &cell)
	if r.status != http.StatusOK || cell["result"] != "2" || cell["execution_count"] != 1.0 {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	r = do(t, http.MethodGet, ts.URL+"/v1/sessions/nope", nil)
	if r.status != http.StatusNotFound || r.errorBody(t).SessionError != "not_found" {
		t.Fatalf("unknown: %d %s", r.status, r.body)
	}
	r = do(t, http.MethodDelete, ts.URL+"/v1/sessions/r1", nil)
	if r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	r = do(t, http.MethodGet, ts.URL+"/v1/sessions", nil)
	var l httpapi.SessionList
	r.json(t, &l)
	if l.Count != 0 {
		t.Fatalf("list after close: %s", r.body)
	}
}

// session_export writes a notebook the real nbformat package (installed by
// uv from the package registry) reads and validates; the notebook resource
// is the same document.
func TestSessionNotebookExport(t *testing.T) {
	if testing.Short() {
		t.Skip("installs nbformat")
	}
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	realpkg.UseSharedCache(t)
	f := newFixture(t)
	ts, _ := serve(t, withJobs(t, f.local(t, nil)), func(o *httpapi.Options) { o.Token = "tok" })
	remote, err := httpapi.NewClient(ts.URL, httpapi.ClientOptions{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	var lp, rp atomic.Int64
	for _, e := range []struct {
		name string
		cs   *mcp.ClientSession
	}{
		{"local", connectInMemory(t, withJobs(t, f.local(t, nil)), &lp)},
		{"remote", connectInMemory(t, remote, &rp)},
	} {
		t.Run(e.name, func(t *testing.T) {
			ctx := context.Background()
			name := "nb-" + e.name
			for _, code := range []string{"x = 6 * 7\nprint('hello')", "x", "import sys\nprint('warn', file=sys.stderr)\n1/0"} {
				if r, err := e.cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"session": name, "code": code}}); err != nil || r.IsError {
					t.Fatalf("cell %q: %v %s", code, err, text(r))
				}
			}
			r, err := e.cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_export", Arguments: map[string]any{"session": name, "path": "out/" + name + ".ipynb"}})
			if err != nil || r.IsError {
				t.Fatalf("export: %v %s", err, text(r))
			}
			if r, _ := e.cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_export", Arguments: map[string]any{"session": name, "path": "x.txt"}}); !r.IsError || !strings.Contains(text(r), "path:") {
				t.Fatalf("bad path: %s", text(r))
			}
			check := "import json, nbformat\nnb = nbformat.read('out/" + name + ".ipynb', as_version=4)\nnbformat.validate(nb)\n" +
				"outs = [[o['output_type'] for o in c.outputs] for c in nb.cells]\nprint(json.dumps([len(nb.cells), outs, nb.cells[1].outputs[0]['data']['text/plain'], nb.cells[2].outputs[-1]['ename']]))"
			r, err = e.cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": check, "dependencies": []string{"nbformat"}, "timeout": 300}})
			if err != nil || r.IsError {
				t.Fatalf("validate: %v %s", err, text(r))
			}
			var s map[string]any
			data, _ := json.Marshal(r.StructuredContent)
			_ = json.Unmarshal(data, &s)
			want := `[3, [["stream"], ["execute_result"], ["stream", "error"]], "42", "ZeroDivisionError"]` + "\n"
			if s["stdout"] != want {
				t.Fatalf("nbformat says %v", s)
			}
			res, err := e.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "session://" + name + "/notebook"})
			if err != nil || !strings.Contains(res.Contents[0].Text, `"nbformat": 4`) {
				t.Fatalf("notebook resource: %v", err)
			}
		})
	}
}

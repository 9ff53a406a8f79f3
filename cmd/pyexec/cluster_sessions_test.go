package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/testutil/mcptest"
)

// cellView is a cell's REST answer, or a refusal's.
type cellView struct {
	Session        string  `json:"session"`
	ExecutionCount int     `json:"execution_count"`
	SessionCreated bool    `json:"session_created"`
	Result         *string `json:"result"`
	Node           string  `json:"node"`
	Status         string  `json:"status"`
	LostReason     string  `json:"lost_reason"`
	Error          *struct {
		Ename string `json:"ename"`
		// A refusal's error is an object too; Code and SessionError tell.
		Code         string `json:"code"`
		Message      string `json:"message"`
		SessionError string `json:"session_error"`
		LostReason   string `json:"lost_reason"`
	} `json:"error"`
}

// sessionCall sends a REST call and decodes its answer; it also returns
// the replica that answered.
func sessionCall(t *testing.T, ctx context.Context, method, url string, body any, v any) (int, string) {
	t.Helper()
	var data string
	if body != nil {
		b, _ := json.Marshal(body)
		data = string(b)
	}
	req := authed(method, url, data).WithContext(ctx)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ""
		}
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, resp.Header.Get("X-Pyexec-Node")
}

func (rs *replicaSet) sessionOwner(t *testing.T, name string) int {
	t.Helper()
	var owner string
	if err := rs.db.QueryRow(`SELECT owner FROM pyexec_sessions WHERE name=$1`, name).Scan(&owner); err != nil {
		t.Fatalf("session %s in the store: %v", name, err)
	}
	return rs.byID(owner)
}

// waitSessionStatus polls a session's state from base until it is want.
func waitSessionStatus(t *testing.T, base, name, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var in cellView
		sessionCall(t, context.Background(), "GET", base+"/v1/sessions/"+name, nil, &in)
		if in.Status == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("session %s never became %s", name, want)
}

func statelessMCP(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sessions", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: endpoint + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{testToken}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestReplicaSetSessions: a Python session lives in one replica's process,
// and any replica answers for it, over REST and MCP (stateless or not).
func TestReplicaSetSessions(t *testing.T) {
	rs := startReplicaSet(t, 3)
	lb := rs.lb.URL
	ctx := context.Background()

	t.Run("REST: one namespace whichever replica a cell lands on", func(t *testing.T) {
		var c cellView
		if st, _ := sessionCall(t, ctx, "POST", lb+"/v1/sessions/ns/run", map[string]any{"code": "x = 1"}, &c); st != 200 || !c.SessionCreated {
			t.Fatalf("first cell: %d %+v", st, c)
		}
		entered := map[string]bool{}
		for i := range 3 {
			var c cellView
			st, node := sessionCall(t, ctx, "POST", lb+"/v1/sessions/ns/run", map[string]any{"code": "x += 1; x"}, &c)
			if st != 200 || c.Result == nil || *c.Result != fmt.Sprint(i+2) || c.SessionCreated {
				t.Fatalf("cell %d through %s: %d %+v", i+2, node, st, c)
			}
			entered[node] = true
		}
		if len(entered) != 3 {
			t.Fatalf("the cells entered through %v, want all three replicas", entered)
		}
		o := rs.sessionOwner(t, "ns")
		for i, nd := range rs.nodes {
			// The store is written behind the cells (coalesced): wait for it.
			deadline := time.Now().Add(10 * time.Second)
			for {
				var l struct {
					Sessions []cellView `json:"sessions"`
				}
				sessionCall(t, ctx, "GET", nd.url+"/v1/sessions", nil, &l)
				if len(l.Sessions) == 1 && l.Sessions[0].Node == rs.nodes[o].id && l.Sessions[0].ExecutionCount == 4 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("replica %d lists %+v; want ns held by replica %d after 4 cells", i, l.Sessions, o)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	})

	t.Run("REST: interrupt from a non-owner", func(t *testing.T) {
		o := rs.sessionOwner(t, "ns")
		other := rs.nodes[(o+1)%3].url
		done := make(chan cellView, 1)
		go func() {
			var c cellView
			sessionCall(t, ctx, "POST", rs.nodes[(o+2)%3].url+"/v1/sessions/ns/run", map[string]any{"code": "import time\nfor _ in range(600): time.sleep(0.1)", "timeout": 120}, &c)
			done <- c
		}()
		waitSessionStatus(t, other, "ns", "busy")
		if st, _ := sessionCall(t, ctx, "POST", other+"/v1/sessions/ns/interrupt", map[string]any{}, nil); st != 200 {
			t.Fatalf("interrupt from a non-owner: %d", st)
		}
		select {
		case c := <-done:
			if c.Error == nil || c.Error.Ename != "KeyboardInterrupt" || c.Status != "idle" {
				t.Fatalf("interrupted cell: %+v", c)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the interrupted cell did not end")
		}
		var c cellView
		if sessionCall(t, ctx, "POST", other+"/v1/sessions/ns/run", map[string]any{"code": "x"}, &c); c.Result == nil || *c.Result != "4" {
			t.Fatalf("the namespace after the interrupt: %+v", c)
		}
	})

	t.Run("REST: a long cell through a non-owner continues as a job any replica follows", func(t *testing.T) {
		o := rs.sessionOwner(t, "ns")
		var c struct {
			cellView
			JobID string `json:"job_id"`
		}
		code := "import time\nprint('start', flush=True)\ntime.sleep(1.5)\nprint('end')\nx"
		if st, _ := sessionCall(t, ctx, "POST", rs.nodes[(o+1)%3].url+"/v1/sessions/ns/run", map[string]any{"code": code, "sync_budget": 0.3}, &c); st != 200 || c.JobID == "" || c.Status != "busy" {
			t.Fatalf("long cell: %d %+v", st, c)
		}
		j := rs.waitFinal(t, rs.nodes[(o+2)%3].url, c.JobID)
		var ch chunkView
		call(t, "GET", fmt.Sprintf("%s/v1/jobs/%s/output?stdout_offset=0", rs.nodes[(o+2)%3].url, c.JobID), nil, &ch)
		if j.Status != "completed" || !strings.Contains(ch.Stdout, "start\nend\n") || !strings.Contains(ch.Stdout, "Out[") {
			t.Fatalf("the cell's job read from a third replica: %+v, output %q", j, ch.Stdout)
		}
	})

	t.Run("MCP stateless: cells, interrupt and cancellation from non-owners", func(t *testing.T) {
		clients := []*mcp.ClientSession{statelessMCP(t, rs.nodes[0].url), statelessMCP(t, rs.nodes[1].url), statelessMCP(t, rs.nodes[2].url)}
		if out := mustCall(t, clients[0], "run_python", map[string]any{"session": "m", "code": "y = 10"}); out["session_created"] != true {
			t.Fatalf("first cell: %v", out)
		}
		for i, cs := range clients {
			if out := mustCall(t, cs, "run_python", map[string]any{"session": "m", "code": "y += 1; y"}); out["result"] != fmt.Sprint(11+i) {
				t.Fatalf("cell through replica %d: %v", i, out)
			}
		}
		o := rs.sessionOwner(t, "m")
		a, b := clients[(o+1)%3], clients[(o+2)%3]
		done := make(chan map[string]any, 1)
		go func() {
			out, _, _ := mcptest.Call(t, a, "run_python", map[string]any{"session": "m", "code": "import time\nfor _ in range(600): time.sleep(0.1)", "timeout": 120})
			done <- out
		}()
		waitSessionStatus(t, rs.nodes[o].url, "m", "busy")
		if out := mustCall(t, b, "session_interrupt", map[string]any{"session": "m"}); out["session"] != "m" {
			t.Fatalf("session_interrupt: %v", out)
		}
		select {
		case out := <-done:
			if b, _ := json.Marshal(out); !strings.Contains(string(b), "KeyboardInterrupt") {
				t.Fatalf("interrupted cell: %s", b)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the interrupted cell did not end")
		}
		// Cancelling the MCP request interrupts the cell on its owner.
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			a.CallTool(cctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"session": "m", "code": "import time\nfor _ in range(600): time.sleep(0.1)", "timeout": 120}})
		}()
		waitSessionStatus(t, rs.nodes[o].url, "m", "busy")
		cancel()
		waitSessionStatus(t, rs.nodes[o].url, "m", "idle")
		if out := mustCall(t, b, "run_python", map[string]any{"session": "m", "code": "y"}); out["result"] != "13" {
			t.Fatalf("the namespace after cancellation: %v", out)
		}
		list := mustCall(t, b, "session_list", map[string]any{})
		if l, _ := list["sessions"].([]any); len(l) != 2 {
			t.Fatalf("session_list lists %v; want the replica set's two sessions", list)
		}
		// An MCP session-based client (sticky to its replica) reaches it too.
		sticky := statelessMCPVersion(t, lb, "2025-11-25")
		if out := mustCall(t, sticky, "run_python", map[string]any{"session": "ns", "code": "x"}); out["result"] != "4" {
			t.Fatalf("session-based client: %v", out)
		}
		if _, text, isErr := mcptest.Call(t, sticky, "session_create", map[string]any{"session": "m"}); !isErr || !strings.Contains(text, "already exists") {
			t.Fatalf("session_create of a name held elsewhere: %q", text)
		}
	})

	t.Run("creating one name on two replicas at once: one wins", func(t *testing.T) {
		out := make(chan int, 2)
		for i := range 2 {
			go func() {
				st, _ := sessionCall(t, ctx, "POST", rs.nodes[i].url+"/v1/sessions", map[string]any{"session": "race"}, nil)
				out <- st
			}()
		}
		a, b := <-out, <-out
		if !(a == 201 && b == 409 || a == 409 && b == 201) {
			t.Fatalf("two creations: %d and %d; want one 201 and one 409 (exists)", a, b)
		}
		sessionCall(t, ctx, "DELETE", lb+"/v1/sessions/race", nil, nil)

		// run_python-style creation (a cell as a job): the loser's cell runs
		// in the winner's session, or is told it is busy, never in a second one.
		type ran struct {
			st int
			c  cellView
		}
		cells := make(chan ran, 2)
		for i := range 2 {
			go func() {
				var c cellView
				st, _ := sessionCall(t, ctx, "POST", rs.nodes[i].url+"/v1/sessions/race2/run", map[string]any{"code": "n = globals().get('n', 0) + 1; n", "sync_budget": 5}, &c)
				cells <- ran{st, c}
			}()
		}
		created := 0
		for range 2 {
			r := <-cells
			switch {
			case r.st == 200 && r.c.SessionCreated:
				created++
			case r.st == 200 && r.c.Result != nil && *r.c.Result == "2":
			case r.st == 409 && r.c.Error != nil && r.c.Error.SessionError == "busy":
			default:
				t.Fatalf("a concurrent first cell: %d %+v %+v", r.st, r.c, r.c.Error)
			}
		}
		if created != 1 {
			t.Fatalf("%d sessions created by two concurrent first cells, want 1", created)
		}
		sessionCall(t, ctx, "DELETE", lb+"/v1/sessions/race2", nil, nil)
	})

	t.Run("kill -9 of the owner: the next call gets node_lost, once", func(t *testing.T) {
		o := rs.sessionOwner(t, "ns")
		killed := time.Now()
		rs.kill9(o)
		var lost time.Duration
		for time.Since(killed) < 30*time.Second && lost == 0 {
			var c cellView
			st, node := sessionCall(t, ctx, "POST", lb+"/v1/sessions/ns/run", map[string]any{"code": "x"}, &c)
			switch {
			case st == 200:
				t.Fatalf("a call after the owner died ran (through %s): %+v", node, c)
			case c.Error != nil && c.Error.SessionError == "lost":
				if c.Error.LostReason != "node_lost" {
					t.Fatalf("lost error: %+v", c.Error)
				}
				lost = time.Since(killed)
			case st == 503 && c.Error != nil && strings.Contains(c.Error.Message, "did not answer"):
				time.Sleep(100 * time.Millisecond) // the owner is not yet past the bound
			default:
				t.Fatalf("a call while the owner is dead but not yet past the bound: %d %+v", st, c.Error)
			}
		}
		if lost == 0 {
			t.Fatal("no node_lost error within 30 s")
		}
		t.Logf("node_lost reported %s after kill -9 (bound %s)", lost.Round(time.Millisecond), nodeLost)
		var c cellView
		if st, _ := sessionCall(t, ctx, "POST", lb+"/v1/sessions/ns/run", map[string]any{"code": "'x' in globals()"}, &c); st != 200 || !c.SessionCreated || *c.Result != "False" {
			t.Fatalf("after the loss was reported: %d %+v; want a new session", st, c)
		}
		sessionCall(t, ctx, "DELETE", lb+"/v1/sessions/ns", nil, nil)
		rs.start(o)
	})

	t.Run("restart of one node: its sessions are listed lost from the store", func(t *testing.T) {
		var c cellView
		if st, _ := sessionCall(t, ctx, "POST", rs.nodes[1].url+"/v1/sessions/kept/run", map[string]any{"code": "z = 1"}, &c); st != 200 {
			t.Fatalf("create on replica 1: %d %+v", st, c)
		}
		rs.stop(1)
		var l struct {
			Sessions []cellView `json:"sessions"`
		}
		sessionCall(t, ctx, "GET", rs.nodes[0].url+"/v1/sessions", nil, &l)
		found := false
		for _, s := range l.Sessions {
			if s.Session == "kept" {
				found = s.Status == "lost" && s.LostReason == "server_restarted"
			}
		}
		if !found {
			t.Fatalf("after the restart the list is %+v; want kept lost (server_restarted)", l.Sessions)
		}
		rs.start(1)
		st, _ := sessionCall(t, ctx, "POST", rs.nodes[1].url+"/v1/sessions/kept/run", map[string]any{"code": "z"}, &c)
		if st != 409 || c.Error == nil || c.Error.LostReason != "server_restarted" {
			t.Fatalf("first call after the restart: %d %+v", st, c)
		}
	})
}

func statelessMCPVersion(t *testing.T, endpoint, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sessions", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: endpoint + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{testToken}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

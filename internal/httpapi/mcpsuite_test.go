package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/mcpserver"
	"github.com/pyexec/pyexec/internal/testutil/pgtest"
)

// toolCase is one MCP tool call of the shared suite and what must hold of
// its result, whichever executor serves it.
type toolCase struct {
	name     string
	tool     string
	args     map[string]any
	progress bool // send a progress token and expect notifications
	check    func(t *testing.T, r *mcp.CallToolResult, structured map[string]any)
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func wantOK(t *testing.T, r *mcp.CallToolResult) {
	t.Helper()
	if r.IsError {
		t.Fatalf("tool error: %s", text(r))
	}
}

func wantToolError(contains string) func(*testing.T, *mcp.CallToolResult, map[string]any) {
	return func(t *testing.T, r *mcp.CallToolResult, _ map[string]any) {
		t.Helper()
		if !r.IsError || !strings.Contains(text(r), contains) {
			t.Fatalf("want a tool error containing %q, got isError=%v %q", contains, r.IsError, text(r))
		}
	}
}

func suite(workspace string) []toolCase {
	quote := `print("Hello 'world' with \"quotes\" and $variables \\ ✓ 你好")`
	return []toolCase{
		{name: "quoting", tool: "run_python", args: map[string]any{"code": quote},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["stdout"] != "Hello 'world' with \"quotes\" and $variables \\ ✓ 你好\n" || s["success"] != true {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "exit code", tool: "run_python", args: map[string]any{"code": "import sys; print('x'); sys.exit(3)"},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r) // a failed run is a result, not a tool error
				if s["exit_code"] != float64(3) || s["success"] != false {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "script with args and stdin", tool: "run_python", args: map[string]any{"script_path": "args_test.py", "args": []string{"a b", "$c"}},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["stdout"] != "Args: ['a b', '$c']\n" {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "seed hello", tool: "run_python", args: map[string]any{"script_path": workspace + "/hello.py"},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["stdout"] != "Hello from UV HTTP MCP!\n" {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "timeout", tool: "run_python", args: map[string]any{"code": "import time; print('partial', flush=True); time.sleep(30)", "timeout": 0.5},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["timed_out"] != true || s["stdout"] != "partial\n" || !strings.Contains(s["stderr"].(string), "[TIMEOUT]") {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "progress", tool: "run_python", progress: true, args: map[string]any{"code": "import time; time.sleep(1.3); print('done')"},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["stdout"] != "done\n" {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "json rendering", tool: "run_python", args: map[string]any{"code": "print(2)", "markdown_output": false},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				var m map[string]any
				if err := json.Unmarshal([]byte(text(r)), &m); err != nil || m["stdout"] != "2\n" {
					t.Fatalf("text %q: %v", text(r), err)
				}
			}},
		{name: "rejected both", tool: "run_python", args: map[string]any{"code": "1", "script_path": "hello.py"},
			check: wantToolError("code: give either code or script_path, not both")},
		{name: "rejected escape", tool: "run_python", args: map[string]any{"script_path": "../../etc/x.py"},
			check: wantToolError("script_path:")},
		{name: "rejected not python", tool: "run_python", args: map[string]any{"script_path": "notes.txt"},
			check: wantToolError("script_path:")},
		{name: "unknown argument", tool: "run_python", args: map[string]any{"code": "1", "bogus": true},
			check: wantToolError("bogus")},
		{name: "batch", tool: "run_python_batch", args: map[string]any{"codes": []string{"print(1)", "1/0", "print(3)"}},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				res := s["results"].([]any)
				if len(res) != 3 || res[0].(map[string]any)["stdout"] != "1\n" || res[1].(map[string]any)["success"] != false || res[2].(map[string]any)["stdout"] != "3\n" {
					t.Fatalf("results %v", res)
				}
			}},
		{name: "batch with a rejected entry", tool: "run_python_batch", args: map[string]any{"requests": []map[string]any{{"code": "print(1)"}, {"script_path": "nope.py"}}},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				res := s["results"].([]any)
				if len(res) != 2 || res[1].(map[string]any)["error"] == "" {
					t.Fatalf("results %v", res)
				}
			}},
		{name: "batch too large", tool: "run_python_batch", args: map[string]any{"codes": make21()},
			check: wantToolError("the limit is 20")},
		{name: "batch both", tool: "run_python_batch", args: map[string]any{"codes": []string{"1"}, "requests": []map[string]any{{"code": "1"}}},
			check: wantToolError("not both")},
		{name: "write file", tool: "write_file", args: map[string]any{"path": "in/data.csv", "content": "a,b\n1,2\n", "overwrite": true},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["path"] != "in/data.csv" || s["size"] != float64(8) || len(fmt.Sprint(s["sha256"])) != 64 {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "write file exists", tool: "write_file", args: map[string]any{"path": "hello.py", "content": "x"},
			check: wantToolError("already exists (pass overwrite to replace it)")},
		{name: "write file outside", tool: "write_file", args: map[string]any{"path": "../x.txt", "content": "x"},
			check: wantToolError("is outside the workspace")},
		{name: "read file", tool: "read_file", args: map[string]any{"path": "hello.py", "offset": 6, "length": 4},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["content"] != "\"Hel" || s["next_offset"] != float64(10) || s["eof"] != false || s["mime"] != "text/plain" {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "read file missing", tool: "read_file", args: map[string]any{"path": "nope.txt"},
			check: wantToolError("does not exist")},
		{name: "list files", tool: "list_files", args: map[string]any{"pattern": "*.py"},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if e, _ := s["entries"].([]any); len(e) != 2 || !strings.Contains(text(r), "args_test.py") {
					t.Fatalf("structured %v", s)
				}
			}},
		// Scripts live on the executing side: a local store, or the
		// execution server's (never the front end's).
		{name: "save script", tool: "save_script", args: map[string]any{"name": "greet", "code": "import sys\nprint('hi', sys.argv[1:])", "dependencies": []string{}, "overwrite": true},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["name"] != "greet" || !strings.HasSuffix(s["path"].(string), "/scripts/greet.py") {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "save script again", tool: "save_script", args: map[string]any{"name": "greet", "code": "print(2)"},
			check: wantToolError(`name: a script named "greet" already exists; pass overwrite: true`)},
		{name: "save script bad name", tool: "save_script", args: map[string]any{"name": "../x", "code": "print(2)"},
			check: wantToolError("name:")},
		{name: "list scripts", tool: "list_scripts", args: map[string]any{},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["count"] != 1.0 || s["scripts"].([]any)[0].(map[string]any)["name"] != "greet" {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "view script", tool: "view_script", args: map[string]any{"name": "greet"},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if !strings.Contains(s["source"].(string), "print('hi', sys.argv[1:])") {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "view unknown script", tool: "view_script", args: map[string]any{"name": "nope"},
			check: wantToolError(`name: no script "nope" among the saved scripts`)},
		{name: "run saved script", tool: "run_python", args: map[string]any{"script_name": "greet", "args": []string{"x"}},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["stdout"] != "hi ['x']\n" {
					t.Fatalf("structured %v", s)
				}
			}},
		{name: "run unknown saved script", tool: "run_python", args: map[string]any{"script_name": "nope"},
			check: wantToolError("script_name:")},
		{name: "server info", tool: "server_info", args: map[string]any{},
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]any) {
				wantOK(t, r)
				if s["version"] != testVersion || s["workspace"] != workspace {
					t.Fatalf("structured %v", s)
				}
			}},
	}
}

func make21() []string {
	out := make([]string, 21)
	for i := range out {
		out[i] = "print(1)"
	}
	return out
}

// callTool runs one case on cs and returns the result with its
// structured content decoded.
func callTool(t *testing.T, cs *mcp.ClientSession, tc toolCase, progressCount *atomic.Int64) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	params := &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args}
	before := progressCount.Load()
	if tc.progress {
		params.SetProgressToken("tok-" + tc.name)
	}
	r, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("%s: protocol error %v", tc.name, err)
	}
	var s map[string]any
	if r.StructuredContent != nil {
		data, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(data, &s)
	}
	if tc.progress && progressCount.Load() == before {
		t.Errorf("%s: no progress notification arrived", tc.name)
	}
	return r, s
}

func newClient(progressCount *atomic.Int64) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "suite", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progressCount.Add(1) },
	})
}

// connectInMemory serves ex as MCP over in-memory transports.
func connectInMemory(t *testing.T, ex executor.Executor, progressCount *atomic.Int64) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, ex, newClient(progressCount))
}

// connectWithScripts is connectInMemory with a script store behind the
// scripts tools.
func connectWithScripts(t *testing.T, ex executor.Executor, store executor.Scripts, progressCount *atomic.Int64) *mcp.ClientSession {
	t.Helper()
	return connectOpts(t, ex, newClient(progressCount), mcpserver.Options{Version: testVersion, SyncBudget: suiteBudget, Scripts: store})
}

// suiteBudget is the smart-async budget of the suite's MCP servers: long
// enough for every sync case on a loaded machine (the progress case sleeps
// 1.3 s after a cold start).
const suiteBudget = 15 * time.Second

func connectWith(t *testing.T, ex executor.Executor, client *mcp.Client) *mcp.ClientSession {
	t.Helper()
	return connectOpts(t, ex, client, mcpserver.Options{Version: testVersion, SyncBudget: suiteBudget})
}

func connectOpts(t *testing.T, ex executor.Executor, client *mcp.Client, opts mcpserver.Options) *mcp.ClientSession {
	t.Helper()
	srv := mcpserver.New(ex, opts)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := client.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

var (
	secondsRe = regexp.MustCompile(`\d+\.\d+ s\b`)
	// prestart: server_info's counters of launchers started ahead, which
	// depend on how many cold runs each server has served so far.
	volatile = []string{"elapsed_seconds", "cpu_user_seconds", "cpu_system_seconds", "peak_rss_bytes", "peak_memory_bytes", "mod_time", "saved_at", "path", "prestart"}
	// storePathRe is where a script store keeps a saved script: a
	// different temp dir for the local and the remote store.
	storePathRe = regexp.MustCompile("`/[^`]*/scripts/")
	savedAtRe   = regexp.MustCompile(`"saved_at": "[^"]*"`)
	// The [TIMEOUT] line says how long the run took before it was killed.
	killedAfterRe = regexp.MustCompile(`killed after \d+\.\ds`)
)

// normalize drops what legitimately differs between two runs of the same
// request (timings and memory) so local and remote results can be compared.
func normalize(r *mcp.CallToolResult, s map[string]any) (string, string) {
	var strip func(v any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range volatile {
				delete(x, k)
			}
			for _, e := range x {
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(s)
	data, _ := json.Marshal(s)
	txt := text(r)
	if !r.IsError && strings.HasPrefix(txt, "{") {
		var m map[string]any
		if json.Unmarshal([]byte(txt), &m) == nil {
			strip(m)
			b, _ := json.Marshal(m)
			txt = string(b)
		}
	}
	txt = storePathRe.ReplaceAllString(txt, "`STORE/scripts/")
	txt = killedAfterRe.ReplaceAllString(txt, "killed after Ns")
	data = killedAfterRe.ReplaceAll(data, []byte("killed after Ns"))
	txt = savedAtRe.ReplaceAllString(txt, `"saved_at": "T"`)
	return secondsRe.ReplaceAllString(txt, "N s"), string(data)
}

// TestMCPSuiteLocalAndRemote runs every MCP tool call of the suite against
// the in-process executor and against a remote execution server through
// httpapi.Client, and requires the same behaviour from both.
func TestMCPSuiteLocalAndRemote(t *testing.T) {
	f := newFixture(t)
	local := withJobs(t, f.local(t, nil))
	localStore, serverStore := openStore(t), openStore(t)
	ts, _ := serve(t, withJobs(t, f.local(t, nil)), func(o *httpapi.Options) {
		o.Token = "tok"
		o.SyncBudget = suiteBudget
		o.Scripts = serverStore
	})
	remote, err := httpapi.NewClient(ts.URL, httpapi.ClientOptions{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	var lp, rp atomic.Int64
	executors := []struct {
		name string
		cs   *mcp.ClientSession
		pc   *atomic.Int64
	}{
		{"local", connectWithScripts(t, local, executor.LocalScripts{Store: localStore}, &lp), &lp},
		{"remote", connectWithScripts(t, remote, remote, &rp), &rp},
	}
	// The same through a balancer in front of replicas on PostgreSQL, when
	// there is one to run on.
	if os.Getenv(pgtest.URLEnv) != "" || os.Getenv(pgtest.RequiredEnv) != "" {
		lb := replicaSet(t, f, 3, func(o *httpapi.Options) { o.Token = "tok"; o.SyncBudget = suiteBudget })
		replicas, err := httpapi.NewClient(lb, httpapi.ClientOptions{Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		var pp atomic.Int64
		executors = append(executors, struct {
			name string
			cs   *mcp.ClientSession
			pc   *atomic.Int64
		}{"replicas", connectInMemory(t, replicas, &pp), &pp})
	}
	for _, tc := range suite(f.workspace) {
		t.Run(tc.name, func(t *testing.T) {
			var names, texts, structs []string
			for _, e := range executors {
				// Saved scripts live in one replica's state dir, which a
				// replica set does not share: not a replica-set case.
				if e.name == "replicas" && scriptCase(tc) {
					continue
				}
				ok := t.Run(e.name, func(t *testing.T) {
					r, s := callTool(t, e.cs, tc, e.pc)
					tc.check(t, r, s)
					tx, st := normalize(r, s)
					texts, structs = append(texts, tx), append(structs, st)
				})
				if ok {
					names = append(names, e.name)
				}
			}
			for i := 1; i < len(texts) && len(texts) == len(names); i++ {
				if texts[0] != texts[i] || structs[0] != structs[i] {
					t.Errorf("local and %s differ:\nlocal  text %q\n%s text %q\nlocal  structured %s\n%s structured %s",
						names[i], texts[0], names[i], texts[i], structs[0], names[i], structs[i])
				}
			}
		})
	}
	// The tool list (names and schemas) is the same server code either
	// way; check it anyway.
	lt, _ := executors[0].cs.ListTools(context.Background(), nil)
	rt, _ := executors[1].cs.ListTools(context.Background(), nil)
	a, _ := json.Marshal(lt)
	b, _ := json.Marshal(rt)
	if string(a) != string(b) {
		t.Error("tool lists differ")
	}
}

// bearer adds a token to every request of an http.Client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// TestMCPOverHTTP runs the suite through /mcp with both generations of
// clients: a stateless 2026-07-28 client and a session-based 2025-11-25
// one (and 2025-06-18), progress notifications included.
func TestMCPOverHTTP(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, withJobs(t, f.local(t, nil)), func(o *httpapi.Options) {
		o.Token = "tok"
		o.SyncBudget = suiteBudget
		o.Scripts = openStore(t)
	})
	testMCPOverHTTP(t, f, ts.URL, true)
}

// TestMCPOverHTTPOnReplicas is TestMCPOverHTTP through a balancer in front
// of replicas on PostgreSQL: session requests are forwarded to the replica
// that created the session. (Saved scripts live in one replica's state dir,
// which a replica set does not share: the scripts cases are left out.)
func TestMCPOverHTTPOnReplicas(t *testing.T) {
	f := newFixture(t)
	testMCPOverHTTP(t, f, replicaSet(t, f, 3, func(o *httpapi.Options) { o.Token = "tok"; o.SyncBudget = suiteBudget }), false)
}

func testMCPOverHTTP(t *testing.T, f fixture, base string, scripts bool) {
	hc := &http.Client{Transport: bearer{"tok", http.DefaultTransport}}
	for _, version := range []string{"", "2025-11-25", "2025-06-18"} {
		name := version
		if name == "" {
			name = "latest-stateless"
		}
		t.Run(name, func(t *testing.T) {
			var pc atomic.Int64
			var opts *mcp.ClientSessionOptions
			if version != "" {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
			}
			cs, err := newClient(&pc).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			got := cs.InitializeResult().ProtocolVersion
			switch {
			case version == "" && (got < "2026-07-28" || cs.ID() != ""):
				t.Fatalf("latest client: protocol %q session %q, want stateless 2026-07-28+", got, cs.ID())
			case version != "" && (got != version || cs.ID() == ""):
				t.Fatalf("protocol %q session %q, want %s with a session", got, cs.ID(), version)
			}
			for _, tc := range suite(f.workspace) {
				if tc.name == "timeout" || tc.name == "batch too large" {
					continue // covered above; keep this matrix quick
				}
				if !scripts && scriptCase(tc) {
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					r, s := callTool(t, cs, tc, &pc)
					tc.check(t, r, s)
				})
			}
		})
	}
	// Without the token, /mcp is closed too.
	_, err := mcp.NewClient(&mcp.Implementation{Name: "x", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1}, nil)
	if err == nil {
		t.Fatal("connected to /mcp without the token")
	}
}

// scriptCase reports whether a suite case uses saved scripts.
func scriptCase(tc toolCase) bool {
	return strings.HasSuffix(tc.tool, "_script") || strings.HasSuffix(tc.tool, "_scripts") || tc.args["script_name"] != nil
}

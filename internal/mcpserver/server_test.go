package mcpserver

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/scripts"
	"github.com/pyexec/pyexec/internal/testutil/gate"
	"github.com/pyexec/pyexec/internal/testutil/proc"
)

var update = flag.Bool("update", false, "rewrite the schema snapshots in testdata")

func TestMain(m *testing.M) {
	launcher.MaybeRun()
	flag.Parse()
	os.Exit(m.Run())
}

// harness is a real go-sdk client talking to the server over in-memory
// transports.
type harness struct {
	session   *mcp.ClientSession
	workspace string

	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	onProg   func(*mcp.ProgressNotificationParams)
	updates  chan string // URIs of notifications/resources/updated
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	eng, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return connect(t, executor.NewLocal(eng, "test", 4), eng.Config().Workspace)
}

func connect(t testing.TB, ex executor.Executor, workspace string, opts ...Options) *harness {
	t.Helper()
	h := &harness{workspace: workspace, updates: make(chan string, 1000)}
	ctx := context.Background()
	o := Options{Version: "test"}
	if len(opts) > 0 {
		o = opts[0]
	}
	srv := New(ex, o)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			h.mu.Lock()
			h.progress = append(h.progress, req.Params)
			f := h.onProg
			h.mu.Unlock()
			if f != nil {
				f(req.Params)
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case h.updates <- req.Params.URI:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.session = cs
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return h
}

func (h *harness) call(t *testing.T, ctx context.Context, name string, args any, token any) *mcp.CallToolResult {
	t.Helper()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		params.SetProgressToken(token)
	}
	res, err := h.session.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func decode[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var out T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return out
}

// TestToolsAndSchemas snapshots every tool of every toolset.
func TestToolsAndSchemas(t *testing.T) {
	state := t.TempDir()
	eng, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	store, err := scripts.Open(state, scripts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	all, _ := ParseToolsets("all")
	h := connect(t, executor.NewLocal(eng, "test", 4), eng.Config().Workspace, Options{Version: "test", Toolsets: all, Scripts: executor.LocalScripts{Store: store}})
	list, err := h.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("%s: description, input or output schema missing", tool.Name)
		}
		for _, schema := range []any{tool.InputSchema, tool.OutputSchema} {
			for _, path := range undescribed(schema, tool.Name) {
				t.Errorf("field without description: %s", path)
			}
		}
		snapshot := map[string]any{"description": tool.Description, "inputSchema": tool.InputSchema, "outputSchema": tool.OutputSchema}
		got, _ := json.MarshalIndent(snapshot, "", "  ")
		golden := filepath.Join("testdata", "schemas", tool.Name+".json")
		if *update {
			os.MkdirAll(filepath.Dir(golden), 0o755)
			os.WriteFile(golden, append(got, '\n'), 0o644)
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/mcpserver -update to create it)", err)
		}
		if strings.TrimSpace(string(want)) != strings.TrimSpace(string(got)) {
			t.Errorf("%s schema changed; if intended, run go test ./internal/mcpserver -update\n%s", tool.Name, got)
		}
	}
	want := "run_python,run_python_batch,server_info,benchmark_python,plan_batch,chunk_code,save_script,list_scripts,view_script," +
		"execute_python_script,check_execution_server,test_hello_world_http,test_minimal_http,get_http_server_info," +
		"run_script_in_dir,run_script_with_dependencies,benchmark_script,py_list_scripts,py_view_script," +
		"py_run_script_in_dir,py_run_script_with_dependencies,py_benchmark_script,py_save_script,py_run_saved_script," +
		"run_script_profile,environment_cache_list,environment_create_persistent,format_code,lint_code,env_list,env_create,env_delete," +
		"session_create,session_list,session_close,session_reset,session_interrupt,session_export,write_file,read_file,list_files"
	slices.Sort(names)
	wantNames := strings.Split(want, ",")
	slices.Sort(wantNames)
	if strings.Join(names, ",") != strings.Join(wantNames, ",") {
		t.Fatalf("tools %v, want %s", names, want)
	}
}

// undescribed walks a JSON schema and returns the properties lacking a
// description.
func undescribed(schema any, path string) []string {
	b, _ := json.Marshal(schema)
	var m map[string]any
	json.Unmarshal(b, &m)
	var out []string
	var walk func(node map[string]any, path string)
	walk = func(node map[string]any, path string) {
		props, _ := node["properties"].(map[string]any)
		for name, p := range props {
			pm, _ := p.(map[string]any)
			if d, _ := pm["description"].(string); d == "" {
				out = append(out, path+"."+name)
			}
			walk(pm, path+"."+name)
			if items, ok := pm["items"].(map[string]any); ok {
				walk(items, path+"."+name+"[]")
			}
		}
	}
	walk(m, path)
	return out
}

func TestRunPythonQuotingRoundTrip(t *testing.T) {
	h := newHarness(t)
	code := `print("Hello 'world' with \"quotes\" and $variables")`
	res := h.call(t, context.Background(), "run_python", map[string]any{"code": code}, nil)
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	out := decode[RunPythonOutput](t, res)
	want := "Hello 'world' with \"quotes\" and $variables\n"
	if out.Stdout != want || !out.Success || out.ExitCode != 0 || out.Executable == "" || out.PythonVersionUsed == "" {
		t.Fatalf("structured result %+v", out)
	}
	if md := text(res); !strings.Contains(md, want) || !strings.Contains(md, "exit code 0") {
		t.Fatalf("markdown content lacks the output:\n%s", md)
	}

	res = h.call(t, context.Background(), "run_python", map[string]any{"code": code, "markdown_output": false}, nil)
	var fromText RunPythonOutput
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil || fromText.Stdout != want {
		t.Fatalf("markdown_output=false: content is not the JSON result: %q (%v)", text(res), err)
	}
}

func TestRunPythonFailuresAndRejections(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		args    map[string]any
		isError bool
		want    string
	}{
		{"failing run is a normal result", map[string]any{"code": "import sys; sys.exit(4)"}, false, "exit code 4"},
		{"timeout is a normal result", map[string]any{"code": "import time; time.sleep(60)", "timeout": 1}, false, "[TIMEOUT]"},
		{"workspace escape is a tool error", map[string]any{"script_path": "../x.py"}, true, "script_path"},
		{"missing code is a tool error", map[string]any{}, true, "give one of code"},
		{"unknown argument is a tool error", map[string]any{"code": "1", "bogus": 1}, true, "bogus"},
		{"wrong type is a tool error", map[string]any{"code": 5}, true, "code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := h.call(t, ctx, "run_python", tt.args, nil)
			if res.IsError != tt.isError || !strings.Contains(text(res), tt.want) {
				t.Fatalf("isError %v text %q; want isError %v containing %q", res.IsError, text(res), tt.isError, tt.want)
			}
		})
	}
}

func TestRunPythonBatch(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// Only the sleeper has a short timeout: a loaded machine may take a
	// second to start Python.
	res := h.call(t, ctx, "run_python_batch", map[string]any{
		"requests": []map[string]any{
			{"code": "print('zero')"}, {"code": "import sys; sys.exit(2)"},
			{"code": "import time; time.sleep(60)", "timeout": 1}, {"code": "print('three')"},
		},
		"timeout": 60,
	}, nil)
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	out := decode[executor.BatchResult](t, res)
	if len(out.Results) != 4 {
		t.Fatalf("%d results", len(out.Results))
	}
	r := out.Results
	if r[0].Stdout != "zero\n" || !r[0].Success || r[1].ExitCode != 2 || r[1].Success || !r[2].TimedOut || r[3].Stdout != "three\n" {
		t.Fatalf("results out of order or wrong: %+v", r)
	}
	for i, item := range r {
		if item.Index != i {
			t.Fatalf("result %d has index %d", i, item.Index)
		}
	}

	// Full requests, one rejected: the others still run.
	res = h.call(t, ctx, "run_python_batch", map[string]any{
		"requests": []map[string]any{{"code": "import sys; print(sys.argv[1])", "args": []string{"a"}}, {"script_path": "/etc/passwd.py"}},
	}, nil)
	out = decode[executor.BatchResult](t, res)
	if out.Results[0].Stdout != "a\n" || !strings.Contains(out.Results[1].Error, "outside the workspace") {
		t.Fatalf("results %+v", out.Results)
	}

	tooMany := make([]string, 21)
	for i := range tooMany {
		tooMany[i] = "print(1)"
	}
	res = h.call(t, ctx, "run_python_batch", map[string]any{"codes": tooMany}, nil)
	if !res.IsError || !strings.Contains(text(res), "limit is 20") {
		t.Fatalf("21 snippets: isError %v %q", res.IsError, text(res))
	}
}

func TestProgressNotificationsWhileRunning(t *testing.T) {
	h := newHarness(t)
	gateFile := gate.Path(t)
	var once sync.Once
	h.onProg = func(p *mcp.ProgressNotificationParams) {
		// The run only finishes once a heartbeat has reported its output.
		if strings.Contains(p.Message, "6 B stdout") {
			once.Do(func() { os.WriteFile(gateFile, nil, 0o644) })
		}
	}
	code := fmt.Sprintf("import os, time\nprint('hello', flush=True)\nwhile not os.path.exists(%q): time.sleep(0.01)\n", gateFile)
	res := h.call(t, context.Background(), "run_python", map[string]any{"code": code, "timeout": 60}, "tok-1")
	if res.IsError || !decode[RunPythonOutput](t, res).Success {
		t.Fatalf("run failed: %s", text(res))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.progress) == 0 || h.progress[0].ProgressToken != "tok-1" {
		t.Fatalf("progress notifications: %+v", h.progress)
	}
	for i := 1; i < len(h.progress); i++ {
		if h.progress[i].Progress <= h.progress[i-1].Progress {
			t.Fatalf("progress did not increase: %v then %v", h.progress[i-1].Progress, h.progress[i].Progress)
		}
	}
}

func TestCancelledCallKillsTheRun(t *testing.T) {
	h := newHarness(t)
	pidFile := filepath.Join(h.workspace, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	h.onProg = func(p *mcp.ProgressNotificationParams) {
		if !strings.Contains(p.Message, " 0 B stdout") {
			cancel() // the script is running and has written its pid
		}
	}
	mark := proc.Mark(t)
	code := proc.Sleeper(mark) + fmt.Sprintf("import os, time\nopen(%q, 'w').write(str(os.getpid()))\nprint('started', flush=True)\ntime.sleep(600)", pidFile)
	params := &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code, "timeout": 600}}
	params.SetProgressToken("tok-cancel")
	if _, err := h.session.CallTool(ctx, params); err == nil {
		t.Fatal("cancelled call returned no error")
	}
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatal(err)
	}
	waitGone(t, mark)
}

func TestServerInfo(t *testing.T) {
	h := newHarness(t)
	res := h.call(t, context.Background(), "server_info", map[string]any{}, nil)
	info := decode[executor.Info](t, res)
	if info.Workspace != h.workspace || info.DefaultInterpreter.Path == "" || len(info.Interpreters) == 0 || info.Limits.MaxBatch != 20 || info.UV == "" {
		t.Fatalf("server_info %+v", info)
	}
	if !strings.Contains(text(res), h.workspace) {
		t.Fatalf("markdown lacks the workspace: %s", text(res))
	}
	// Sizes read as sizes, and the timeout rule is spelt out.
	for _, want := range []string{"code 1 MiB", "stdin 1 MiB", "inline output 1 MiB per stream", "memory 2 GiB", "files up to 1 GiB",
		"- timeouts: Every run: the request's timeout, default 30s (--timeout), at most 600s (--max-timeout). timeout 0 or absent means the default"} {
		if !strings.Contains(text(res), want) {
			t.Errorf("server_info lacks %q:\n%s", want, text(res))
		}
	}
	if strings.Contains(text(res), "2147483648") || info.Limits.Timeouts == "" || info.Limits.MaxRequestBytes != 6<<20 || info.Limits.MaxBatchRequestBytes != 26<<20 {
		t.Errorf("server_info limits %+v", info.Limits)
	}
}

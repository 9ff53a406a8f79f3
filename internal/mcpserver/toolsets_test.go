package mcpserver

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/testutil/mcptest"
)

var (
	coreTools    = []string{"benchmark_python", "chunk_code", "plan_batch", "run_python", "run_python_batch", "server_info"}
	scriptsTools = []string{"list_scripts", "save_script", "view_script"}
	compatTools  = []string{
		// uv-exec-mcp
		"check_execution_server", "execute_python_script", "get_http_server_info", "test_hello_world_http", "test_minimal_http",
		// python-executor-mcp (without its job tools: see registerJobs)
		"benchmark_script", "py_list_scripts", "py_view_script", "run_script_in_dir", "run_script_with_dependencies",
		// its running server's py_ names (without its job tools), its roadmap's names
		"py_benchmark_script", "py_run_saved_script", "py_run_script_in_dir", "py_run_script_with_dependencies", "py_save_script",
		"environment_cache_list", "environment_create_persistent", "run_script_profile",
	}
	qualityTools = []string{"format_code", "lint_code"}
	envTools     = []string{"env_create", "env_delete", "env_list"}
	filesTools   = []string{"list_files", "read_file", "write_file"}
	sessionTools = []string{"session_close", "session_create", "session_export", "session_interrupt", "session_list", "session_reset"}
)

func sorted(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return out
}

func TestToolsets(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []string
	}{
		{"", sorted(coreTools, scriptsTools, qualityTools, envTools, sessionTools, filesTools)}, // the default: core,jobs,scripts,quality,envs,sessions,files
		{"core", sorted(coreTools)},
		{"scripts", sorted(scriptsTools)},
		{"compat", sorted(compatTools)},
		{"quality,envs", sorted(qualityTools, envTools)},
		{"files", sorted(filesTools)},
		{"sessions", sorted(sessionTools)},
		{"all", sorted(coreTools, scriptsTools, compatTools, qualityTools, envTools, sessionTools, filesTools)},
		{" Core , compat,core", sorted(coreTools, compatTools)},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			cs, _ := connectWithStore(t, testServer{workspace: t.TempDir(), toolsets: tc.spec})
			got := mcptest.ToolNames(t, cs)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("tools = %v\nwant    %v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"nope", "core,jbos", ",", ""} {
		if _, err := ParseToolsets(bad); err == nil {
			t.Errorf("ParseToolsets(%q) accepted", bad)
		}
	}
}

func TestScriptsRoundTripAndAutosave(t *testing.T) {
	cs, store := connectWithStore(t, testServer{workspace: t.TempDir()})

	out, text, isErr := mcptest.Call(t, cs, "save_script", map[string]any{
		"name": "greet", "code": "\"\"\"Greets its first argument.\"\"\"\nimport sys\nprint('hello', sys.argv[1])\n",
		"requires_python": ">=3.8",
	})
	if isErr || out["name"] != "greet" || !strings.Contains(text, "script_name") {
		t.Fatalf("save_script: %v %q", out, text)
	}
	if _, text, isErr := mcptest.Call(t, cs, "save_script", map[string]any{"name": "../evil", "code": "pass"}); !isErr || !strings.Contains(text, "name") {
		t.Errorf("bad name accepted: %q", text)
	}
	if _, text, isErr := mcptest.Call(t, cs, "save_script", map[string]any{"name": "greet", "code": "pass"}); !isErr || !strings.Contains(text, "overwrite") {
		t.Errorf("silent overwrite: %q", text)
	}

	out, _, isErr = mcptest.Call(t, cs, "list_scripts", nil)
	list, _ := out["scripts"].([]any)
	if isErr || len(list) != 1 {
		t.Fatalf("list_scripts: %v", out)
	}
	e := list[0].(map[string]any)
	if e["name"] != "greet" || e["description"] != "Greets its first argument." || e["requires_python"] != ">=3.8" || !strings.HasSuffix(e["path"].(string), "scripts/greet.py") {
		t.Errorf("entry = %v", e)
	}

	out, text, isErr = mcptest.Call(t, cs, "view_script", map[string]any{"name": "greet"})
	if isErr || !strings.Contains(out["source"].(string), "# requires-python = \">=3.8\"") || !strings.Contains(text, "```python") {
		t.Errorf("view_script: %v %q", out, text)
	}

	out, _, isErr = mcptest.Call(t, cs, "run_python", map[string]any{"script_name": "greet", "args": []string{"world"}})
	if isErr || out["stdout"] != "hello world\n" {
		t.Errorf("run by script_name: %v", out)
	}
	if _, text, isErr := mcptest.Call(t, cs, "run_python", map[string]any{"script_name": "greet", "code": "pass"}); !isErr || !strings.Contains(text, "script_name") {
		t.Errorf("script_name with code accepted: %q", text)
	}
	if _, text, isErr := mcptest.Call(t, cs, "run_python", map[string]any{"script_name": "missing"}); !isErr || !strings.Contains(text, "no script") {
		t.Errorf("unknown script_name: %q", text)
	}

	// Inline code is autosaved with the call's arguments (secrets redacted);
	// a run by script_name is not.
	code := "import os; print(os.environ['TOKEN'])"
	if out, _, _ := mcptest.Call(t, cs, "run_python", map[string]any{"code": code, "env_vars": map[string]string{"TOKEN": "s3cret"}}); out["stdout"] != "s3cret\n" {
		t.Fatalf("run: %v", out)
	}
	store.Flush()
	out, _, _ = mcptest.Call(t, cs, "list_scripts", map[string]any{"include_autosaved": true})
	list, _ = out["scripts"].([]any)
	var auto []map[string]any
	for _, x := range list {
		if m := x.(map[string]any); m["autosaved"] == true {
			auto = append(auto, m)
		}
	}
	if len(auto) != 1 {
		t.Fatalf("autosaved entries = %v", auto)
	}
	out, _, isErr = mcptest.Call(t, cs, "view_script", map[string]any{"name": auto[0]["name"], "autosaved": true})
	side, _ := out["sidecar"].(map[string]any)
	args, _ := side["arguments"].(map[string]any)
	if isErr || out["source"] != code || side["tool"] != "run_python" || args["env_vars"].(map[string]any)["TOKEN"] != "<redacted>" {
		t.Errorf("autosaved view = %v", out)
	}
	if b, _ := json.Marshal(out); strings.Contains(string(b), "s3cret") {
		t.Error("a secret env var value reached the autosave sidecar")
	}
}

func TestBenchmarkPythonTool(t *testing.T) {
	cs, _ := connectWithStore(t, testServer{workspace: t.TempDir()})
	out, text, isErr := mcptest.Call(t, cs, "benchmark_python", map[string]any{
		"code":   "def hot():\n    return sum(range(200000))\nprint(hot())\n",
		"repeat": 2, "warmup": 0, "profile": true,
	})
	if isErr {
		t.Fatal(text)
	}
	runs, _ := out["runs"].([]any)
	stats, _ := out["statistics"].(map[string]any)
	if len(runs) != 2 || out["stdout"] != "19999900000\n" || stats["peak_rss_mb"] == nil || out["peak_rss_mb"].(float64) <= 1 ||
		out["wall_time_seconds"].(float64) <= 0 || out["cpu_time_seconds"].(float64) <= 0 {
		t.Errorf("benchmark = %v", out)
	}
	if !strings.Contains(text, "| peak RSS, largest process (MiB) |") || !strings.Contains(text, "`hot`") {
		t.Errorf("markdown = %s", text)
	}
	if _, text, isErr := mcptest.Call(t, cs, "benchmark_python", map[string]any{"code": "pass", "repeat": 1000}); !isErr || !strings.Contains(text, "repeat") {
		t.Errorf("repeat over the limit: %q", text)
	}
}

func TestPlanningTools(t *testing.T) {
	cs, _ := connectWithStore(t, testServer{workspace: t.TempDir(), maxWorkers: 8})
	out, text, isErr := mcptest.Call(t, cs, "plan_batch", map[string]any{"items": []any{}, "complexity": "low"})
	if isErr || out["workers"].(float64) != 0 || len(out["chunks"].([]any)) != 0 || !strings.Contains(text, "No items") {
		t.Errorf("0 items: %v %q", out, text)
	}
	out, _, _ = mcptest.Call(t, cs, "plan_batch", map[string]any{"items": []any{"a", 1, map[string]any{"k": "v"}}, "complexity": "low"})
	if out["workers"].(float64) != 3 || len(out["chunks"].([]any)) != 3 {
		t.Errorf("more workers than items: %v", out)
	}
	if _, text, isErr := mcptest.Call(t, cs, "plan_batch", map[string]any{"items": []any{1}, "complexity": "huge"}); !isErr || !strings.Contains(text, "complexity") {
		t.Errorf("bad complexity: %q", text)
	}
	out, _, isErr = mcptest.Call(t, cs, "chunk_code", map[string]any{"code": "a = 1\n" + strings.Repeat("x", 20) + "\nb = 2\n", "max_bytes": 10})
	if isErr || len(out["chunks"].([]any)) != 3 || out["oversized"].([]any)[0].(float64) != 1 {
		t.Errorf("chunk_code: %v", out)
	}
}

func TestCompatRejectsWhatItCannotDo(t *testing.T) {
	cs, _ := connectWithStore(t, testServer{workspace: t.TempDir(), toolsets: "compat"})
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_script_in_dir", map[string]any{"directory": ".", "script_content": "pass", "async_mode": true}, "async_mode"},
		{"run_script_in_dir", map[string]any{"directory": ".", "script_content": "pass", "script_path": "x.py"}, "not both"},
		{"run_script_in_dir", map[string]any{"directory": "."}, "script_path"},
		{"run_script_in_dir", map[string]any{"directory": "missing", "script_content": "pass"}, "cwd"},
		{"run_script_in_dir", map[string]any{"directory": ".", "script_content": "pass", "timeout_seconds": -1}, "timeout_seconds"},
		{"execute_python_script", map[string]any{"script_path": "../outside.py"}, "outside the workspace"},
		{"execute_python_script", map[string]any{"script_path": "notes.txt"}, "not a .py file"},
	} {
		_, text, isErr := mcptest.Call(t, cs, tc.tool, tc.args)
		if !isErr || !strings.Contains(text, tc.want) {
			t.Errorf("%s %v: isError=%t %q, want an error mentioning %q", tc.tool, tc.args, isErr, text, tc.want)
		}
	}
}

func TestCompatTimeoutZeroMeansServerMaximum(t *testing.T) {
	cs, _ := connectWithStore(t, testServer{workspace: t.TempDir(), toolsets: "compat"})
	start := time.Now()
	out, text, isErr := mcptest.Call(t, cs, "run_script_in_dir", map[string]any{"directory": ".", "script_content": "import time; time.sleep(0.2); print('ok')", "timeout_seconds": 0})
	if isErr || out["stdout"] != "ok\n" || out["timed_out"] != false || time.Since(start) < 200*time.Millisecond {
		t.Errorf("timeout_seconds 0: %v %q", out, text)
	}
}

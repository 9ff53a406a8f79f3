package seedcompat

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/mcpserver"
	"github.com/pyexec/pyexec/internal/scripts"
	"github.com/pyexec/pyexec/internal/testutil/mcptest"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// The tools python-executor-mcp's running server registers (not its
// README: the py_-prefixed names, shared/seed-servers.md), each with every
// parameter and its default and the result fields it documents. The test
// walks the whole table against `--toolsets compat`: the tool is listed,
// every parameter is in its input schema with its default stated, a call
// answers with the documented fields, and the defaults that change what
// happens are observed (timeout_seconds 300 on the job, python_version 3.12,
// auto_parse_imports installing what the imports need, py_prune_jobs
// keeping jobs).

// realTool is one row of the table.
type realTool struct {
	name   string
	params map[string]string // parameter -> documented default ("" none)
	fields []string          // result fields
}

var realTools = []realTool{
	{"py_run_script_in_dir", map[string]string{"directory": "", "script_path": "", "script_content": "", "args": "", "use_uv": "true", "python_version": "",
		"timeout_seconds": "300", "env_vars": "", "env_file": "", "async_mode": "false", "job_label": "", "auto_install_deps": "true"},
		[]string{"stdout", "stderr", "exit_code", "execution_strategy", "elapsed_seconds"}},
	{"py_run_script_with_dependencies", map[string]string{"script_content": "", "script_path": "", "python_version": "3.12", "dependencies": "", "args": "",
		"timeout_seconds": "300", "auto_parse_imports": "true", "env_vars": "", "env_file": "", "async_mode": "", "job_label": "", "ignore_project_requirements": "true"},
		[]string{"stdout", "stderr", "exit_code", "execution_strategy", "elapsed_seconds", "resolved_dependencies", "python_version_used"}},
	{"py_benchmark_script", map[string]string{"script_content": "", "script_path": "", "python_version": "3.12", "dependencies": "", "args": "",
		"timeout_seconds": "300", "sample_interval": "0.05", "env_vars": "", "env_file": "", "async_mode": "", "job_label": ""},
		[]string{"stdout", "stderr", "exit_code", "execution_strategy", "elapsed_seconds", "resolved_dependencies", "python_version_used", "wall_time_seconds", "cpu_time_seconds", "peak_rss_mb"}},
	{"py_list_running_jobs", map[string]string{}, []string{"job_id", "running", "exit_code", "pid", "elapsed_seconds", "stream", "stdout_chunks", "stderr_chunks"}},
	{"py_get_job_output", map[string]string{"job_id": ""}, []string{"status", "stdout", "stderr", "exit_code", "elapsed_seconds"}},
	{"py_kill_job", map[string]string{"job_id": ""}, []string{"job_id", "status", "exit_code"}},
	{"py_cleanup_jobs", map[string]string{"remove_inline": "true", "only_finished": "true"}, nil},
	{"py_save_script", map[string]string{"script_name": "", "source": "", "dependencies": "", "requires_python": "", "overwrite": "false"}, []string{"written", "path", "message"}},
	{"py_run_saved_script", map[string]string{"script_name": "", "args": "", "timeout_seconds": "300", "env_vars": "", "env_file": "", "async_mode": "", "job_label": "", "auto_install_deps": "true"},
		[]string{"stdout", "stderr", "exit_code", "execution_strategy", "elapsed_seconds"}},
	{"py_list_scripts", map[string]string{}, nil},
	{"py_job_status", map[string]string{"job_id": "", "incremental": "true"}, []string{"job"}},
	{"py_list_jobs", map[string]string{"status_filter": "", "limit": "50"}, []string{"jobs", "total"}},
	{"py_cancel_job", map[string]string{"job_id": ""}, []string{"job_id", "status"}},
	{"py_prune_jobs", map[string]string{"keep_completed": "true", "keep_failed": "true", "max_age_hours": "24"}, []string{"removed", "remaining"}},
}

// standIns are hermetic wheels for the packages the calls import: the
// import names differ from the distributions, as the real ones do.
func standIns(t *testing.T) string {
	return wheels.Dir(t,
		wheels.Package{Name: "beautifulsoup4", Version: "4.12.3", Module: "bs4"},
		wheels.Package{Name: "scikit-learn", Version: "1.5.0", Module: "sklearn"},
		wheels.Package{Name: "pillow", Version: "10.4.0", Module: "PIL"},
	)
}

func TestRealToolNamesInMemory(t *testing.T) {
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	ws, state, whl := t.TempDir(), t.TempDir(), standIns(t)
	eng, err := engine.New(engine.Config{Workspace: ws, StateDir: state,
		Deps: engine.DepsConfig{Index: uvenv.IndexSettings{NoIndex: true, Offline: true, FindLinks: []string{whl}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	store, err := scripts.Open(state, scripts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	lj, err := executor.OpenLocalJobs(context.Background(), executor.NewLocal(eng, "test", 0), jobs.Config{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lj.Close(context.Background()) })
	sets, _ := mcpserver.ParseToolsets("compat")
	walkRealTools(t, mcptest.Connect(t, mcpserver.New(lj, mcpserver.Options{Version: "test", Toolsets: sets, Scripts: executor.LocalScripts{Store: store, Jobs: lj}})), ws)
}

func TestRealToolNamesSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts pyexec mcp")
	}
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	ws := t.TempDir()
	cmd := exec.Command(os.Args[0], "mcp", "--toolsets", "compat", "--workspace", ws, "--state-dir", t.TempDir(), "--log-level", "warn",
		"--no-index", "--offline", "--find-links", standIns(t))
	cmd.Env = append(os.Environ(), asCLI+"=1")
	walkRealTools(t, mcptest.Command(t, cmd), ws)
}

func walkRealTools(t *testing.T, cs *mcp.ClientSession, ws string) {
	ctx := context.Background()
	listed := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed[tool.Name] = tool
	}
	for _, rt := range realTools {
		tool := listed[rt.name]
		if tool == nil {
			t.Errorf("%s is not offered", rt.name)
			continue
		}
		props := schemaProps(tool.InputSchema)
		for p, def := range rt.params {
			desc, ok := props[p]
			switch {
			case !ok:
				t.Errorf("%s: no parameter %s", rt.name, p)
			case def != "" && !strings.Contains(strings.ToLower(desc), strings.ToLower(def)):
				t.Errorf("%s.%s: the description does not state the default %s: %q", rt.name, p, def, desc)
			}
		}
	}
	res, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || !slices.ContainsFunc(res.ResourceTemplates, func(r *mcp.ResourceTemplate) bool { return r.URITemplate == "job-stream://{job_id}" }) {
		t.Errorf("resource job-stream://{job_id}: %v %v", res, err)
	}

	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		out, text, isErr := mcptest.Call(t, cs, tool, args)
		if isErr {
			t.Fatalf("%s: %s", tool, text)
		}
		for _, rt := range realTools {
			if rt.name == tool && tool != "py_list_running_jobs" { // its fields are per entry: checked below
				wantFields(t, out, rt.fields...)
			}
		}
		return out
	}

	// py_run_script_in_dir: auto_install_deps installs what the imports need.
	out := call("py_run_script_in_dir", map[string]any{"directory": ".", "script_content": "import os, bs4\nprint(bs4.__version__)\n"})
	if out["stdout"] != "4.12.3\n" || !slices.Equal(anyStrings(out["inferred_dependencies"]), []string{"beautifulsoup4"}) {
		t.Errorf("py_run_script_in_dir with an import: %v", out)
	}
	// timeout_seconds defaults to 300: the job says so.
	out = call("py_run_script_in_dir", map[string]any{"directory": ".", "script_content": "print('async')", "async_mode": true})
	id, _ := out["job_id"].(string)
	job := waitJob(t, cs, id)
	if job["timeout_seconds"] != float64(300) {
		t.Errorf("default timeout: the job's limit is %v", job["timeout_seconds"])
	}
	// py_job_status is incremental by default: the output comes once.
	st := call("py_job_status", map[string]any{"job_id": id})
	again := call("py_job_status", map[string]any{"job_id": id})
	full := call("py_job_status", map[string]any{"job_id": id, "incremental": false})
	if result(st)["stdout"] != "async\n" || result(again)["stdout"] != "" || result(full)["stdout"] != "async\n" {
		t.Errorf("py_job_status incremental: %v / %v / %v", st, again, full)
	}
	call("py_get_job_output", map[string]any{"job_id": id})
	if snap := readStream(t, cs, id); !strings.Contains(snap, "---STDOUT---\nasync\n") || !strings.Contains(snap, "---STDERR---") {
		t.Errorf("job-stream://: %q", snap)
	}

	// python_version defaults to 3.12 (installed here); auto_parse_imports
	// maps sklearn to scikit-learn.
	out = call("py_run_script_with_dependencies", map[string]any{"script_content": "import sys, sklearn\nprint(sklearn.__version__)\n"})
	if !strings.HasPrefix(fmt.Sprint(out["python_version_used"]), "3.12") && out["note"] == nil {
		t.Errorf("python_version default: %v", out)
	}
	if out["stdout"] != "1.5.0\n" || !slices.Contains(anyStrings(out["resolved_dependencies"]), "scikit-learn==1.5.0") {
		t.Errorf("py_run_script_with_dependencies: %v", out)
	}
	out = call("py_run_script_with_dependencies", map[string]any{"script_content": "import sklearn\n", "auto_parse_imports": false})
	if out["exit_code"] == float64(0) || !strings.Contains(fmt.Sprint(out["stderr"]), "ModuleNotFoundError") {
		t.Errorf("auto_parse_imports false still installed: %v", out)
	}
	out = call("py_benchmark_script", map[string]any{"script_content": "print(sum(range(1000)))", "sample_interval": 0.05})
	if out["stdout"] != "499500\n" {
		t.Errorf("py_benchmark_script: %v", out)
	}

	// Saved scripts.
	out = call("py_save_script", map[string]any{"script_name": "greet", "source": "import sys, PIL\nprint('hi', sys.argv[1], PIL.__version__)\n"})
	if out["written"] != "true" || out["message"] != "Script saved" || !strings.HasSuffix(fmt.Sprint(out["path"]), "greet.py") {
		t.Errorf("py_save_script: %v", out)
	}
	if _, text, isErr := mcptest.Call(t, cs, "py_save_script", map[string]any{"script_name": "greet", "source": "pass"}); !isErr || !strings.Contains(text, "overwrite") {
		t.Errorf("py_save_script over an existing name: %q", text)
	}
	if out = call("py_run_saved_script", map[string]any{"script_name": "greet", "args": []string{"you"}}); out["stdout"] != "hi you 10.4.0\n" {
		t.Errorf("py_run_saved_script: %v", out)
	}
	if out = call("py_list_scripts", nil); !strings.Contains(fmt.Sprint(out), "greet") {
		t.Errorf("py_list_scripts: %v", out)
	}

	// Jobs: list, kill, cancel, prune, clean up.
	out = call("py_run_script_in_dir", map[string]any{"directory": ".", "script_content": "import time\nprint('up', flush=True)\ntime.sleep(60)", "async_mode": true})
	sleeper := out["job_id"].(string)
	out = call("py_run_script_in_dir", map[string]any{"directory": ".", "script_content": "import time\ntime.sleep(60)", "async_mode": true})
	sleeper2 := out["job_id"].(string)
	waitRunning(t, cs, sleeper)
	// Running (and pending) jobs only: the two sleepers, no finished job.
	entries, _ := call("py_list_running_jobs", nil)["result"].([]any)
	if len(entries) != 2 {
		t.Fatalf("py_list_running_jobs: %v", entries)
	}
	for _, e := range entries {
		for _, f := range realTools[3].fields {
			if _, ok := e.(map[string]any)[f].(string); !ok {
				t.Errorf("py_list_running_jobs entry field %s is not a string: %v", f, e)
			}
		}
	}
	if out = call("py_kill_job", map[string]any{"job_id": sleeper}); out["status"] != "killed" {
		t.Errorf("py_kill_job: %v", out)
	}
	if out = call("py_cancel_job", map[string]any{"job_id": sleeper2}); out["status"] != "cancelled" {
		t.Errorf("py_cancel_job: %v", out)
	}
	if out = call("py_list_jobs", map[string]any{"status_filter": "cancelled"}); out["total"] != float64(2) {
		t.Errorf("py_list_jobs: %v", out)
	}
	if out = call("py_prune_jobs", nil); out["removed"] != float64(0) {
		t.Errorf("py_prune_jobs with its defaults (keep everything younger than 24 h) removed: %v", out)
	}
	out = call("py_cleanup_jobs", nil)
	if out["removed_jobs"].(float64) < 3 || out["remaining_jobs"] != float64(0) || out["removed_inline"].(float64) < 3 {
		t.Errorf("py_cleanup_jobs: %v", out)
	}
	_ = ws
}

func TestRealToolTableMatchesSeedServers(t *testing.T) {
	var doc string
	for _, p := range []string{"../../../shared/seed-servers.md", "../../../../shared/seed-servers.md"} {
		if b, err := os.ReadFile(p); err == nil {
			doc = string(b)
			break
		}
	}
	if doc == "" {
		t.Skip("shared/seed-servers.md is not beside this checkout")
	}
	section := doc[strings.Index(doc, "## python-executor-mcp"):]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	param := regexp.MustCompile("`([a-z_]+)`(?: \\(([^)]*)\\))?")
	rows := map[string]map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`py_") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		params := map[string]string{}
		for _, m := range param.FindAllStringSubmatch(cells[2], -1) {
			def := strings.Trim(m[2], "\"")
			if def == "none" {
				def = ""
			}
			params[m[1]] = def
		}
		rows[name] = params
	}
	if len(rows) == 0 {
		t.Fatal("no py_ rows found in seed-servers.md")
	}
	for name, params := range rows {
		i := slices.IndexFunc(realTools, func(r realTool) bool { return r.name == name })
		if i < 0 {
			t.Errorf("%s is in seed-servers.md but not in the test table", name)
			continue
		}
		for p, def := range params {
			got, ok := realTools[i].params[p]
			if !ok || (def != "" && got != def) {
				t.Errorf("%s.%s: seed-servers.md says default %q, the test table %q (present %t)", name, p, def, got, ok)
			}
		}
	}
}

func schemaProps(schema any) map[string]string {
	m, _ := toMap(schema)["properties"].(map[string]any)
	out := map[string]string{}
	for k, v := range m {
		d, _ := v.(map[string]any)["description"].(string)
		out[k] = d
	}
	return out
}

func toMap(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func anyStrings(v any) []string {
	var out []string
	for _, x := range toSlice(v) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func toSlice(v any) []any { s, _ := v.([]any); return s }

func result(status map[string]any) map[string]any {
	job, _ := status["job"].(map[string]any)
	r, _ := job["result"].(map[string]any)
	return r
}

// waitJob polls py_job_status until the job has finished.
func waitJob(t *testing.T, cs *mcp.ClientSession, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, text, isErr := mcptest.Call(t, cs, "py_list_jobs", map[string]any{"limit": 100})
		if isErr {
			t.Fatal(text)
		}
		for _, j := range toSlice(out["jobs"]) {
			jm := j.(map[string]any)
			if jm["job_id"] == id && jm["status"] != "pending" && jm["status"] != "running" {
				return jm
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s did not finish", id)
	return nil
}

// waitRunning polls until the job printed its first line.
func waitRunning(t *testing.T, cs *mcp.ClientSession, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, _, _ := mcptest.Call(t, cs, "py_get_job_output", map[string]any{"job_id": id})
		if strings.Contains(fmt.Sprint(out["stdout"]), "up") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s did not start", id)
}

func readStream(t *testing.T, cs *mcp.ClientSession, id string) string {
	t.Helper()
	r, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "job-stream://" + id})
	if err != nil || len(r.Contents) == 0 {
		t.Fatalf("read job-stream://%s: %v", id, err)
	}
	return r.Contents[0].Text
}

package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/testutil/pgtest"
)

// jobTranscript drives every job tool, the job resources and a resource
// subscription through cs, and returns a normalized transcript (job ids and
// times removed) so two executors can be compared step by step.
func jobTranscript(t *testing.T, cs *mcp.ClientSession, workspace, tag string, updates *atomic.Int64) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	idRe := regexp.MustCompile(`[0-9a-zA-Z_-]{8,}`)
	call := func(tool string, args map[string]any) (map[string]any, *mcp.CallToolResult) {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var s map[string]any
		data, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(data, &s)
		return s, r
	}
	note := func(step string, s map[string]any, r *mcp.CallToolResult, keys ...string) {
		parts := []string{step}
		if r.IsError {
			parts = append(parts, "error: "+idRe.ReplaceAllString(text(r), "ID"))
		}
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%v", k, s[k]))
		}
		out = append(out, strings.Join(parts, " "))
	}
	// follow reads a job to its end through get_job's cursors and returns
	// all its stdout: nothing may come twice.
	follow := func(id string) (string, map[string]any) {
		t.Helper()
		var stdout strings.Builder
		var so, se float64
		for {
			s, r := call("get_job", map[string]any{"job_id": id, "stdout_offset": so, "stderr_offset": se, "wait": 30})
			if r.IsError {
				t.Fatalf("get_job: %s", text(r))
			}
			stdout.WriteString(s["stdout"].(string))
			so, se = s["next_stdout_offset"].(float64), s["next_stderr_offset"].(float64)
			if s["output_done"] == true {
				return stdout.String(), s
			}
		}
	}

	// 1. async job, followed to its end by cursor.
	s, r := call("run_python", map[string]any{"code": "import time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b')", "mode": "async", "job_label": "L" + tag})
	note("async", s, r)
	id := s["job_id"].(string)
	stdout, final := follow(id)
	out = append(out, fmt.Sprintf("followed stdout=%q status=%v exit_code=%v", stdout, final["status"], final["exit_code"]))

	// 2. job resources.
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "job://" + id + "/output"})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, "resource output "+rr.Contents[0].Text)
	rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "job-stream://" + id})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, "resource alias "+rr.Contents[0].Text)

	// 3. smart-async handoff of a sync run, then cancel.
	s, r = call("run_python", map[string]any{"code": "import time\nprint('early', flush=True)\ntime.sleep(120)", "timeout": 300})
	note("handoff", s, r, "status", "stdout")
	hid, _ := s["job_id"].(string)
	if hid == "" {
		t.Fatalf("no handoff: %v %s", s, text(r))
	}
	s, r = call("cancel_job", map[string]any{"job_id": hid})
	note("cancel", s, r, "status")
	stdout, final = follow(hid)
	out = append(out, fmt.Sprintf("after cancel stdout=%q status=%v", stdout, final["status"]))

	// 4. list, unknown job, prune.
	s, r = call("list_jobs", map[string]any{"label": "L" + tag})
	note("list", s, r, "total")
	s, r = call("get_job", map[string]any{"job_id": "no-such-job-anywhere"})
	note("unknown", s, r)
	s, r = call("cancel_job", map[string]any{"job_id": "no-such-job-anywhere"})
	note("cancel unknown", s, r)

	// 5. a subscription sees the job change: the job waits for a file the
	// test creates only once subscribed.
	gate := filepath.Join(workspace, "go-"+tag)
	s, r = call("run_python", map[string]any{"code": fmt.Sprintf("import os, time\nwhile not os.path.exists(%q): time.sleep(0.02)\nprint('went')", gate), "mode": "async"})
	sid := s["job_id"].(string)
	before := updates.Load()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "job://" + sid + "/output"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _ = follow(sid)
	out = append(out, fmt.Sprintf("subscribed job stdout=%q", stdout))
	for updates.Load() == before {
		// The notification is coalesced (at most 4 per second) and may trail
		// the end of the job; wait for it on the job's own terms.
		call("get_job", map[string]any{"job_id": sid, "wait": 1})
	}

	s, r = call("prune_jobs", map[string]any{})
	note("prune", s, r, "removed", "remaining")
	return out
}

// TestMCPJobsLocalAndRemote runs the job tools against a local executor
// with jobs and against a remote execution server through httpapi.Client,
// and requires the same transcript from both.
func TestMCPJobsLocalAndRemote(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, withJobs(t, f.local(t, nil)), nil)
	remote, err := httpapi.NewClient(ts.URL, httpapi.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exs := []executor.Executor{withJobs(t, f.local(t, nil)), remote}
	if os.Getenv(pgtest.URLEnv) != "" || os.Getenv(pgtest.RequiredEnv) != "" {
		// And through a balancer in front of replicas on PostgreSQL.
		replicas, err := httpapi.NewClient(replicaSet(t, f, 3, nil), httpapi.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		exs = append(exs, replicas)
	}
	var transcripts [][]string
	for i, ex := range exs {
		var updates atomic.Int64
		client := mcp.NewClient(&mcp.Implementation{Name: "jobs", Version: "1"}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { updates.Add(1) },
		})
		cs := connectWith(t, ex, client)
		transcripts = append(transcripts, jobTranscript(t, cs, f.workspace, fmt.Sprint(i), &updates))
	}
	local := transcripts[0]
	t.Logf("transcript:\n%s", strings.Join(local, "\n"))
	for _, rem := range transcripts[1:] {
		for i := range max(len(local), len(rem)) {
			var a, b string
			if i < len(local) {
				a = local[i]
			}
			if i < len(rem) {
				b = rem[i]
			}
			if a != b {
				t.Errorf("step %d differs:\nlocal  %q\nremote %q", i, a, b)
			}
		}
	}
	for _, want := range []string{
		`followed stdout="a\nb\n" status=completed exit_code=0`,
		`handoff status=running stdout=early`,
		`cancel status=cancelled`,
		`list total=1`,
		`subscribed job stdout="went\n"`,
	} {
		if !strings.Contains(strings.Join(local, "\n"), want) {
			t.Errorf("transcript lacks %q:\n%s", want, strings.Join(local, "\n"))
		}
	}
}

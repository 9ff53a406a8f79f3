package httpapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/testutil/smallfs"
)

// TestFullStateDirOverHTTP runs the execution server with its state dir on
// a real 32 MiB filesystem and fills it while jobs run: the job that ends
// on the full disk is failed ("state dir full") instead of running forever,
// cancel answers 200, new work is refused with 507 saying what to do, the
// server keeps serving, and once space is freed runs work again.
func TestFullStateDirOverHTTP(t *testing.T) {
	state := smallfs.Mount(t, 32<<20)
	f := newFixture(t)
	eng, err := engine.New(engine.Config{Workspace: f.workspace, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	jx, err := executor.OpenLocalJobs(context.Background(), executor.NewLocal(eng, testVersion, 2), jobs.Config{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jx.Close(context.Background()) })
	ts, _ := serve(t, jx, nil)
	gate := filepath.Join(f.workspace, "go")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o644) })

	start := func(code string) string {
		t.Helper()
		var j jobs.Job
		r := do(t, "POST", ts.URL+"/v1/jobs", httpapi.StartJobRequest{Request: engine.Request{Code: code}})
		r.json(t, &j)
		if r.status != 202 {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		var ch jobs.Chunk
		do(t, "GET", ts.URL+"/v1/jobs/"+j.ID+"/output?wait=30", nil).json(t, &ch)
		if !strings.HasPrefix(ch.Stdout, "started") {
			t.Fatalf("job %s did not start: %+v", j.ID, ch)
		}
		return j.ID
	}
	loud := start("import os, sys, time\nprint('started', flush=True)\nwhile not os.path.exists(" + jsonString(gate) + "):\n    time.sleep(0.02)\nsys.stdout.write('x' * (4 << 20))\n")
	quiet := start("import time\nprint('started', flush=True)\ntime.sleep(120)\n")

	free := smallfs.Fill(t, state)
	os.WriteFile(gate, nil, 0o644)
	var j jobs.Job
	for !j.Status.Terminal() {
		var ch jobs.Chunk
		do(t, "GET", ts.URL+"/v1/jobs/"+loud+"/output?stdout_offset=0&max_bytes=1&wait=30", nil).json(t, &ch)
		do(t, "GET", ts.URL+"/v1/jobs/"+loud, nil).json(t, &j)
	}
	if j.Status != jobs.StatusFailed || !strings.Contains(j.Error, "state dir full") {
		t.Fatalf("job that ended on the full disk: %s %q", j.Status, j.Error)
	}

	r := do(t, "POST", ts.URL+"/v1/jobs/"+quiet+"/cancel", nil)
	r.json(t, &j)
	if r.status != 200 || j.Status != jobs.StatusCancelled {
		t.Fatalf("cancel on the full disk: %d %s", r.status, r.body)
	}
	for _, c := range []struct{ path string }{{"/v1/jobs"}, {"/v1/run"}} {
		r := do(t, "POST", ts.URL+c.path, engine.Request{Code: "print('a new snippet')"})
		e := r.errorBody(t)
		if r.status != 507 || e.Code != httpapi.CodeStorageFull || !strings.Contains(e.Message, "state dir") || !strings.Contains(e.Message, "free space") {
			t.Fatalf("POST %s on the full disk: %d %+v", c.path, r.status, e)
		}
	}
	var l jobs.JobList
	if r := do(t, "GET", ts.URL+"/v1/jobs", nil); r.status != 200 {
		t.Fatalf("list on the full disk: %d %s", r.status, r.body)
	} else {
		r.json(t, &l)
	}
	for _, x := range l.Jobs {
		if !x.Status.Terminal() {
			t.Fatalf("list shows %s %s", x.ID, x.Status)
		}
	}

	free()
	var res engine.Result
	r = do(t, "POST", ts.URL+"/v1/run", engine.Request{Code: "print('room again')"})
	r.json(t, &res)
	if r.status != 200 || res.Stdout != "room again\n" {
		t.Fatalf("run after freeing space: %d %s", r.status, r.body)
	}
}

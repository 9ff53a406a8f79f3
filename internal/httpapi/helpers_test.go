package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/scripts"
)

const testVersion = "test"

// fixture is a workspace and state dir shared by a local executor and a
// server, so local and remote runs see the same files and paths.
type fixture struct {
	workspace, stateDir string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ws := t.TempDir()
	if p, err := filepath.EvalSymlinks(ws); err == nil {
		ws = p
	}
	files := map[string]string{
		"hello.py":     "print(\"Hello from UV HTTP MCP!\")\n",
		"args_test.py": "import sys; print(\"Args:\", sys.argv[1:])\n",
		"notes.txt":    "not python\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return fixture{workspace: ws, stateDir: t.TempDir()}
}

func (f fixture) local(t *testing.T, mutate func(*engine.Config)) *executor.Local {
	t.Helper()
	cfg := engine.Config{Workspace: f.workspace, StateDir: f.stateDir}
	if mutate != nil {
		mutate(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return executor.NewLocal(eng, testVersion, 4)
}

// withJobs adds a job manager (its store in a fresh dir) to l, closed at
// the end of the test.
func withJobs(t *testing.T, l *executor.Local) *executor.LocalJobs {
	t.Helper()
	jx, err := executor.OpenLocalJobs(context.Background(), l, jobs.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jx.Close(context.Background()) })
	return jx
}

// serve starts an httptest server (a real loopback listener) around ex.
func serve(t *testing.T, ex executor.Executor, mutate func(*httpapi.Options)) (*httptest.Server, *httpapi.Server) {
	t.Helper()
	cfg := engineOf(ex).Config()
	opts := httpapi.Options{Executor: ex, Version: testVersion, CodeLimit: cfg.CodeLimit, Workspace: cfg.Workspace}
	if mutate != nil {
		mutate(&opts)
	}
	opts.NoAuth = opts.Token == "" // tests of auth set a token
	srv, err := httpapi.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, srv
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r response) errorBody(t *testing.T) httpapi.ErrorDetail {
	t.Helper()
	var eb httpapi.ErrorBody
	r.json(t, &eb)
	return eb.Error
}

// do sends one request; body may be a string (sent as is) or a value
// (JSON-encoded). Headers come in pairs.
func do(t *testing.T, method, url string, body any, headers ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

func engineOf(ex executor.Executor) *engine.Engine {
	switch x := ex.(type) {
	case *executor.Local:
		return x.Engine()
	case *executor.LocalJobs:
		return x.Engine()
	}
	panic("no engine")
}

// openStore opens a script store in a fresh dir, closed at the end of the
// test.
func openStore(t *testing.T) *scripts.Store {
	t.Helper()
	s, err := scripts.Open(t.TempDir(), scripts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/quality"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// Named environments, format, lint and profile over REST: the routes, their
// errors naming the field, and the Go client (the remote executor) saying
// the same as the local one.
func TestEnvsAndToolRoutes(t *testing.T) {
	f := newFixture(t)
	whl := wheels.Dir(t)
	local := f.local(t, func(c *engine.Config) {
		c.Deps = engine.DepsConfig{Index: uvenv.IndexSettings{NoIndex: true, Offline: true, FindLinks: []string{whl}}}
	})
	local.SetRuff("/nonexistent/ruff") // format and lint run here without installing ruff
	ts, _ := serve(t, local, nil)
	c, err := httpapi.NewClient(ts.URL, httpapi.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	e, err := c.CreateEnv(ctx, executor.EnvCreateRequest{Name: "rest", Dependencies: []string{"pyexec-alpha==2.0"}}, nil)
	if err != nil || !e.Pinned || e.Names[0] != "rest" {
		t.Fatalf("create over REST: %+v %v", e, err)
	}
	res, err := c.Run(ctx, engine.Request{Code: "import pyexec_alpha; print(pyexec_alpha.__version__)", Env: "rest"}, nil)
	if err != nil || res.Stdout != "2.0\n" {
		t.Fatalf("run in env over REST: %+v %v", res, err)
	}
	l, err := c.Envs(ctx)
	if err != nil || len(l.Envs) != 1 || l.Envs[0].Key != e.Key {
		t.Fatalf("list over REST: %+v %v", l, err)
	}
	if r := do(t, "POST", ts.URL+"/v1/envs", map[string]any{"name": "../x", "dependencies": []string{"a"}}); r.status != 400 || r.errorBody(t).Field != "name" {
		t.Errorf("bad name: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", ts.URL+"/v1/envs", map[string]any{"name": "x", "dependencies": []string{"a"}, "bogus": 1}); r.status != 400 || r.errorBody(t).Field != "bogus" {
		t.Errorf("unknown field: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", ts.URL+"/v1/envs/rest", nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/envs/rest: %d", r.status)
	}
	del, err := c.DeleteEnv(ctx, "rest")
	if err != nil || del.Name != "rest" {
		t.Fatalf("delete over REST: %+v %v", del, err)
	}
	_, err = c.DeleteEnv(ctx, "rest")
	var re *engine.RequestError
	if !errors.As(err, &re) || re.Field != "name" || !strings.Contains(re.Message, "no environment is named") {
		t.Errorf("second delete over REST: %v", err)
	}

	// Format and lint reach the server's runner; its errors come back as
	// request errors naming the field.
	_, err = c.Format(ctx, engineFormat("x", 1000))
	if !errors.As(err, &re) || re.Field != "line_length" {
		t.Errorf("format with a bad line_length over REST: %v", err)
	}
	if _, err := c.Lint(ctx, engineLint(nil)); !errors.As(err, &re) || re.Field != "code" {
		t.Errorf("lint of nothing over REST: %v", err)
	}

	// Profile runs on the server.
	p, err := c.Profile(ctx, executor.ProfileRequest{Request: engine.Request{Code: "def f():\n    return 1\nf()\nprint('x')"}, Rows: 5}, nil)
	if err != nil || p.Stdout != "x\n" || len(p.Profile) == 0 || strings.Contains(p.Stderr, "@@pyexec-profile") {
		t.Fatalf("profile over REST: %+v %v", p, err)
	}
}

func engineFormat(code string, lineLength int) quality.FormatRequest {
	return quality.FormatRequest{Source: quality.Source{Code: code}, LineLength: lineLength}
}

func engineLint(sel []string) quality.LintRequest {
	return quality.LintRequest{Select: sel}
}

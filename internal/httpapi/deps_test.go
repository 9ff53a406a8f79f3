package httpapi_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/testutil/pyinterp"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// TestRemoteDependenciesAndEnvMetrics: a run with dependencies through the
// remote executor builds its uv environment once on the server, and the
// env cache series count the build and the hit.
func TestRemoteDependenciesAndEnvMetrics(t *testing.T) {
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	f := newFixture(t)
	ex := f.local(t, func(c *engine.Config) {
		c.Python = pyinterp.Real(t)
		c.Deps = engine.DepsConfig{Index: uvenv.IndexSettings{NoIndex: true, Offline: true, FindLinks: []string{wheels.Dir(t)}}}
	})
	ts, _ := serve(t, ex, func(o *httpapi.Options) { o.EnvBuilds = ex.Engine().Environments().Builds })
	c, _ := httpapi.NewClient(ts.URL, httpapi.ClientOptions{})
	for range 2 {
		res, err := c.Run(context.Background(), engine.Request{Code: "import pyexec_alpha; print(pyexec_alpha.__version__)", Dependencies: []string{"pyexec-alpha==1.0"}}, nil)
		if err != nil || res.Stdout != "1.0\n" || res.ExecutionStrategy != "uv-env" || len(res.ResolvedDependencies) == 0 {
			t.Fatalf("%+v %v", res, err)
		}
	}
	m := string(do(t, "GET", ts.URL+"/metrics", nil).body)
	for _, want := range []string{
		`pyexec_env_builds_total 1`,
		`pyexec_env_cache_hits_total 1`,
		`pyexec_env_runs_total{strategy="uv-env"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pyexec/pyexec/internal/cluster"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/pgdb"
	"github.com/pyexec/pyexec/internal/testutil/pgtest"
)

// replicaSet starts n execution servers sharing one fresh PostgreSQL
// database, each with its own engine, state dir, pools and listener as
// separate processes would have, behind a round-robin balancer, and
// returns the balancer's URL. The suites that run against one server run
// against it unchanged.
func replicaSet(t *testing.T, f fixture, n int, mutate func(*httpapi.Options)) string {
	t.Helper()
	store := pgtest.NewDatabase(t)
	var backends []*url.URL
	var warm sync.WaitGroup
	for range n {
		db, err := pgdb.Open(context.Background(), store, pgdb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		l := f.local(t, nil)
		jx, err := executor.OpenLocalJobs(context.Background(), l, jobs.Config{StateDir: t.TempDir(), DB: db})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewUnstartedServer(nil)
		m, err := cluster.Join(context.Background(), cluster.Config{DB: db, NodeID: jx.Manager().NodeID(), Addr: "http://" + ts.Listener.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		cfg := l.Engine().Config()
		opts := httpapi.Options{Executor: jx, Version: testVersion, CodeLimit: cfg.CodeLimit, Workspace: cfg.Workspace, Router: cluster.NewRouter(m, nil)}
		if mutate != nil {
			mutate(&opts)
		}
		opts.NoAuth = opts.Token == "" // tests of auth set a token
		srv, err := httpapi.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		ts.Config.Handler = srv.Handler()
		ts.Start()
		t.Cleanup(func() { // in reverse: server, membership, jobs, database
			db.Close()
		})
		t.Cleanup(func() { jx.Close(context.Background()) })
		t.Cleanup(func() { m.Leave(context.Background()) })
		t.Cleanup(ts.Close)
		u, _ := url.Parse(ts.URL)
		backends = append(backends, u)
		// What a readiness probe would wait for: the first /v1/info finds
		// the interpreters and uv, seconds on a loaded machine.
		warm.Add(1)
		go func() { defer warm.Done(); jx.Info(context.Background()) }()
	}
	warm.Wait()
	var next atomic.Uint64
	lb := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(backends[next.Add(1)%uint64(len(backends))])
			pr.Out.Host = pr.Out.URL.Host
		},
		FlushInterval: -1,
	})
	t.Cleanup(lb.Close)
	return lb.URL
}

var _ http.Handler = (*httputil.ReverseProxy)(nil)

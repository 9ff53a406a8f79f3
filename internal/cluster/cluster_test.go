package cluster_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/cluster"
	"github.com/pyexec/pyexec/internal/pgdb"
	"github.com/pyexec/pyexec/internal/testutil/pgtest"
)

func join(t *testing.T, db *pgdb.DB, id, addr string, onLost func(context.Context, []string)) *cluster.Membership {
	t.Helper()
	m, err := cluster.Join(context.Background(), cluster.Config{DB: db, NodeID: id, Addr: addr, LostAfter: time.Second, OnLost: onLost,
		Status: func() cluster.Status { return cluster.Status{FreeSlots: 2, MaxSlots: 4, WarmEnvs: []string{"env1"}} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Leave(context.Background()) })
	return m
}

func TestMembershipAndRouting(t *testing.T) {
	db, err := pgdb.Open(context.Background(), pgtest.NewDatabase(t), pgdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	// Node b serves what belongs to it; node a forwards to it.
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "served by b: "+r.URL.Path+" from "+r.Header.Get("X-Pyexec-Routed-By"))
	}))
	defer b.Close()
	lost := make(chan []string, 1)
	a := join(t, db, "aaaa", "http://127.0.0.1:1", func(_ context.Context, ids []string) { lost <- ids })
	mb := join(t, db, "bbbb", b.URL, nil)
	nodes, err := a.Nodes(ctx)
	if err != nil || len(nodes) != 2 || nodes[1].ID != "bbbb" || nodes[1].FreeSlots != 2 || nodes[1].WarmEnvs[0] != "env1" {
		t.Fatalf("nodes = %+v, %v", nodes, err)
	}
	router := cluster.NewRouter(a, nil)
	gone := func(w http.ResponseWriter) { http.Error(w, "gone", http.StatusNotFound) }
	serve := func(id string, headers ...string) (int, string, bool) {
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader("{}"))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		rec := httptest.NewRecorder()
		forwarded := router.Forward(rec, req, id, gone)
		return rec.Code, rec.Body.String(), forwarded
	}
	own := router.NewID()
	if cluster.Owner(own) != "aaaa" {
		t.Fatalf("Owner(%q) = %q", own, cluster.Owner(own))
	}
	cases := []struct {
		name      string
		id        string
		headers   []string
		forwarded bool
		code      int
		body      string
	}{
		{"own id: served here", own, nil, false, 200, ""},
		{"no node in the id: served here", "plain-session-id", nil, false, 200, ""},
		{"another node's id: forwarded", "bbbb.1234", nil, true, 200, "served by b: /mcp from aaaa"},
		{"unknown node: gone", "cccc.1234", nil, true, 404, "gone"},
		{"already forwarded once: never bounced", "bbbb.1234", []string{"X-Pyexec-Routed-By", "zzzz"}, true, 404, "gone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body, fw := serve(tc.id, tc.headers...)
			if fw != tc.forwarded || (fw && (code != tc.code || !strings.Contains(body, tc.body))) {
				t.Fatalf("forwarded %v, %d %q; want %v, %d %q", fw, code, body, tc.forwarded, tc.code, tc.body)
			}
		})
	}

	// b leaves: its ids are gone at once (after the router's short cache).
	mb.Leave(ctx)
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, _, _ := serve("bbbb.1234")
		if code == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after b left: %d, want 404", code)
		}
		time.Sleep(50 * time.Millisecond) // the router caches addresses for a second
	}
	// A node that goes silent is dropped by the others' sweep.
	db.SQL.Exec(`INSERT INTO pyexec_nodes (id, addr, heartbeat_at) VALUES ('dddd', 'http://127.0.0.1:2', now() - interval '1 hour')`)
	select {
	case ids := <-lost:
		if len(ids) != 1 || ids[0] != "dddd" {
			t.Fatalf("lost %v", ids)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the silent node was never dropped")
	}
}

package pgdb_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/pgdb"
	"github.com/pyexec/pyexec/internal/testutil/pgtest"
)

// TestMigrations: replicas starting at once apply each migration once; a
// schema newer than the binary knows is refused, not touched.
func TestMigrations(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := pgdb.Open(ctx, url, pgdb.Options{})
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}
	db, err := pgdb.Open(ctx, url, pgdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var v, rows int
	db.SQL.QueryRow(`SELECT version, (SELECT count(*) FROM pyexec_schema) FROM pyexec_schema`).Scan(&v, &rows)
	if v != pgdb.Version() || rows != 1 {
		t.Fatalf("schema version %d in %d rows, want %d in 1", v, rows, pgdb.Version())
	}
	db.SQL.Exec(`UPDATE pyexec_schema SET version = version + 1`)
	db.Close()
	if _, err := pgdb.Open(ctx, url, pgdb.Options{}); err == nil || !strings.Contains(err.Error(), "newer than this pyexec knows") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

func TestListenNotify(t *testing.T) {
	db, err := pgdb.Open(context.Background(), pgtest.NewDatabase(t), pgdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 1)
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var once sync.Once
		db.Listen(ctx, []string{"pyexec_t"}, func(ch, payload string) { got <- ch + ":" + payload }, func() { once.Do(func() { close(ready) }) })
	}()
	<-ready
	if err := db.Notify(ctx, "pyexec_t", "hello"); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g != "pyexec_t:hello" {
			t.Fatalf("got %q", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	cancel()
	<-done
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@db/x":          "postgres://u:xxxxx@db/x",
		"postgres://u@db/x?password=secret": "postgres://u@db/x?password=xxxxx",
		"postgresql://db/x?sslmode=require": "postgresql://db/x?sslmode=require",
	} {
		if got := pgdb.Redact(in); got != want || strings.Contains(got, "secret") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOpenWaitsForServer: a database that is not listening yet (it starts
// beside pyexec) is waited for; one that answers "no" fails at once.
func TestOpenWaitsForServer(t *testing.T) {
	target, err := url.Parse(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	// A free loopback port on which nothing listens until Open has said
	// it is waiting; then a proxy to the real server starts there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	late := *target
	late.Host = addr
	waiting := make(chan struct{})
	var once sync.Once
	logger := slog.New(handlerFunc(func(r slog.Record) {
		if strings.Contains(r.Message, "waiting for PostgreSQL") {
			once.Do(func() { close(waiting) })
		}
	}))
	opened := make(chan error, 1)
	go func() {
		db, err := pgdb.Open(context.Background(), late.String(), pgdb.Options{Logger: logger, ConnectWait: time.Minute})
		if err == nil {
			db.Close()
		}
		opened <- err
	}()
	select {
	case <-waiting:
	case err := <-opened:
		t.Fatalf("Open returned (%v) before waiting for a server that was not listening", err)
	}
	proxy, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", target.Host)
				if err != nil {
					return
				}
				defer s.Close()
				go io.Copy(s, c)
				io.Copy(c, s)
			}()
		}
	}()
	if err := <-opened; err != nil {
		t.Fatalf("Open after the server came up: %v", err)
	}

	// A server that answers and refuses: no waiting.
	missing := *target
	missing.Path = "/no_such_database_here"
	waited := false
	quiet := slog.New(handlerFunc(func(r slog.Record) { waited = waited || strings.Contains(r.Message, "waiting") }))
	if _, err := pgdb.Open(context.Background(), missing.String(), pgdb.Options{Logger: quiet, ConnectWait: time.Minute}); err == nil {
		t.Fatal("Open of a missing database succeeded")
	} else if waited {
		t.Fatalf("Open waited for a server that answered: %v", err)
	}
}

// handlerFunc is a slog.Handler that calls fn for every record.
type handlerFunc func(slog.Record)

func (f handlerFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (f handlerFunc) Handle(_ context.Context, r slog.Record) error { f(r); return nil }
func (f handlerFunc) WithAttrs([]slog.Attr) slog.Handler            { return f }
func (f handlerFunc) WithGroup(string) slog.Handler                 { return f }

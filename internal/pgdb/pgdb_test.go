package pgdb_test

import (
	"context"
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

// Package pgtest gives tests a fresh PostgreSQL database of their own on
// the server named by PYEXEC_TEST_PG_URL (scripts/pgtest.sh starts one).
//
// Without the variable the tests skip, unless PYEXEC_TEST_PG_REQUIRED is
// set (CI sets it): then a missing database fails them, so a broken CI
// setup cannot pass by skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// Env names.
const (
	URLEnv      = "PYEXEC_TEST_PG_URL"
	RequiredEnv = "PYEXEC_TEST_PG_REQUIRED"
	// CtlEnv is the pg_ctl command line (with -D) of the test server, for
	// tests that restart it.
	CtlEnv = "PYEXEC_TEST_PG_CTL"
)

// ServerURL returns the test server's URL, skipping (or, when required,
// failing) the test without one.
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(URLEnv)
	if u == "" {
		if os.Getenv(RequiredEnv) != "" {
			t.Fatalf("%s is set but %s is not: the PostgreSQL tests must run here (see scripts/pgtest.sh)", RequiredEnv, URLEnv)
		}
		t.Skipf("no PostgreSQL: set %s (scripts/pgtest.sh starts a throwaway server)", URLEnv)
	}
	return u
}

// NewDatabase creates an empty database for this test, dropped at its end,
// and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	base := ServerURL(t)
	var b [6]byte
	rand.Read(b[:])
	name := "pyexec_t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		admin.Close()
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// Restart stops and starts the test server (fast shutdown: connections
// are dropped). It fails the test when CtlEnv is not set.
func Restart(t testing.TB, down time.Duration) {
	t.Helper()
	ctl := strings.Fields(os.Getenv(CtlEnv))
	if len(ctl) == 0 {
		t.Fatalf("%s is not set: cannot restart PostgreSQL", CtlEnv)
	}
	run := func(args ...string) {
		cmd := exec.Command(ctl[0], append(ctl[1:], args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
		}
	}
	run("-m", "fast", "-w", "stop")
	started := false
	defer func() {
		if !started { // never leave the shared server down for the tests after this one
			exec.Command(ctl[0], append(ctl[1:], "-w", "start")...).Run()
		}
	}()
	time.Sleep(down) // the outage itself is what is tested
	run("-w", "start")
	started = true
}

var _ = stdlib.GetDefaultDriver // registers the "pgx" database/sql driver

// Package pgdb is pyexec's one connection to PostgreSQL, the engine replicas
// share: it opens the pools, applies the versioned schema migrations at
// start, and carries LISTEN/NOTIFY. The jobs store (internal/jobs) and node
// membership (internal/cluster) both sit on it.
//
// Why one package: the schema is one unit (the job queue's claim query
// reads the nodes table), so its migrations live in one ordered list, and
// every replica applies them under one advisory lock at start.
package pgdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// DB is an open PostgreSQL database with pyexec's schema applied.
type DB struct {
	// SQL commits durably (synchronous_commit as the server says): job
	// creation and final states.
	SQL *sql.DB
	// Fast commits without waiting for the WAL flush (synchronous_commit
	// off): heartbeats, leases, output chunks and intermediate job states.
	// A PostgreSQL crash (not a pyexec crash) can lose its last ~0.6 s of
	// commits; nothing there is a promise made to a client.
	Fast *sql.DB

	cfg *pgx.ConnConfig
	log *slog.Logger
}

// IsURL reports whether s names a PostgreSQL database (postgres:// or
// postgresql://) rather than a file.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Redact returns the URL with its password replaced, for logs and errors.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Options tune Open.
type Options struct {
	// MaxConns bounds each pool (default 16).
	MaxConns int
	Logger   *slog.Logger
	// ConnectWait is how long Open keeps trying a server it cannot reach
	// yet (connection refused, its name not resolvable): one starting beside
	// pyexec, as in compose or a pod whose database comes up with it.
	// Default 60 s; errors from a server that answers (a wrong password, no
	// such database) fail at once.
	ConnectWait time.Duration
	// Tracer, when set, sees every statement of both pools (the benchmark
	// counts round trips per job with it).
	Tracer pgx.QueryTracer
}

// Open connects to the database at rawURL and migrates it to the newest
// schema this binary knows. It refuses a schema newer than that.
func Open(ctx context.Context, rawURL string, opts Options) (*DB, error) {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", Redact(rawURL), err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 16
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Tracer != nil {
		cfg.Tracer = opts.Tracer
	}
	fastCfg := cfg.Copy()
	fastCfg.RuntimeParams["synchronous_commit"] = "off"
	db := &DB{SQL: stdlib.OpenDB(*cfg), Fast: stdlib.OpenDB(*fastCfg), cfg: cfg, log: opts.Logger}
	for _, p := range []*sql.DB{db.SQL, db.Fast} {
		p.SetMaxOpenConns(opts.MaxConns)
		p.SetMaxIdleConns(opts.MaxConns)
		p.SetConnMaxIdleTime(5 * time.Minute)
	}
	if opts.ConnectWait <= 0 {
		opts.ConnectWait = 60 * time.Second
	}
	if err := db.waitReachable(ctx, opts.ConnectWait, rawURL); err != nil {
		db.Close()
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := migrate(pctx, db.SQL); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", Redact(rawURL), err)
	}
	return db, nil
}

// waitReachable pings the server until it answers, for up to wait while
// it cannot be reached at all.
func (db *DB) waitReachable(ctx context.Context, wait time.Duration, rawURL string) error {
	deadline := time.Now().Add(wait)
	backoff := 100 * time.Millisecond
	for logged := false; ; {
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := db.SQL.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if !unreachable(err) || time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("store %s: cannot connect: %w", Redact(rawURL), err)
		}
		if !logged {
			db.log.Warn("waiting for PostgreSQL to accept connections", "store", Redact(rawURL), "err", err, "for", wait)
			logged = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store %s: cannot connect: %w", Redact(rawURL), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// unreachable reports whether err says the server could not be reached
// (refused, unresolvable, timed out) rather than that it answered no.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns)
}

// Close closes both pools.
func (db *DB) Close() error { return errors.Join(db.Fast.Close(), db.SQL.Close()) }

// Notify sends payload on channel (delivered when the transaction, here
// the statement, commits; PostgreSQL caps payloads at 8000 bytes).
func (db *DB) Notify(ctx context.Context, channel, payload string) error {
	_, err := db.Fast.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
	return err
}

// Listen delivers notifications of the given channels to fn, from one
// dedicated connection, until ctx is done. When the connection breaks it
// reconnects with backoff, and after every (re)connect it calls onConnect:
// notifications sent while disconnected are lost, so the caller re-reads
// what it waits for. fn and onConnect run on the listening goroutine and
// must not block for long.
func (db *DB) Listen(ctx context.Context, channels []string, fn func(channel, payload string), onConnect func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := db.listenOnce(ctx, channels, fn, func() {
			backoff = 100 * time.Millisecond
			if onConnect != nil {
				onConnect()
			}
		})
		if ctx.Err() != nil {
			return
		}
		db.log.Warn("PostgreSQL listener disconnected; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (db *DB) listenOnce(ctx context.Context, channels []string, fn func(channel, payload string), connected func()) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, db.cfg.Copy())
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Channel, n.Payload)
	}
}

package pgdb

import (
	"context"
	"database/sql"
	"fmt"
)

// migrationLock is the advisory lock key replicas take while migrating, so
// several starting at once apply each migration exactly once.
const migrationLock = 0x7079_6578_6563 // "pyexec"

// migrations are applied in order; pyexec_schema records how many ran.
// Append only: never edit a migration that has shipped.
//
// Times are Unix nanoseconds (bigint), as in the SQLite store, so both
// stores scan rows with the same code; leases and heartbeats use the
// database's clock (timestamptz, now()) so replicas' clocks never matter.
var migrations = []string{
	`CREATE TABLE pyexec_jobs (
		id                  text PRIMARY KEY,
		seq                 bigserial,
		label               text NOT NULL DEFAULT '',
		status              text NOT NULL,
		created_at          bigint NOT NULL,
		started_at          bigint,
		finished_at         bigint,
		timed_out           boolean NOT NULL DEFAULT false,
		exit_code           integer,
		error               text NOT NULL DEFAULT '',
		pid                 integer NOT NULL DEFAULT 0,
		timeout_seconds     double precision NOT NULL DEFAULT 0,
		request             text NOT NULL,
		run_info            text,
		progress            text,
		stdout_bytes        bigint NOT NULL DEFAULT 0,
		stderr_bytes        bigint NOT NULL DEFAULT 0,
		stdout_truncated    boolean NOT NULL DEFAULT false,
		stderr_truncated    boolean NOT NULL DEFAULT false,
		-- the queue and leases
		owner               text NOT NULL DEFAULT '',
		epoch               bigint NOT NULL DEFAULT 0,
		lease_until         timestamptz,
		env_key             text NOT NULL DEFAULT '',
		run_request         text,
		cancel_requested    boolean NOT NULL DEFAULT false,
		-- output flushed to pyexec_job_output so far, per stream
		stdout_flushed      bigint NOT NULL DEFAULT 0,
		stderr_flushed      bigint NOT NULL DEFAULT 0
	);
	CREATE INDEX pyexec_jobs_created ON pyexec_jobs (created_at DESC, seq DESC);
	CREATE INDEX pyexec_jobs_status ON pyexec_jobs (status, created_at DESC);
	CREATE INDEX pyexec_jobs_queue ON pyexec_jobs (seq) WHERE status = 'pending' AND owner = '';
	CREATE INDEX pyexec_jobs_leases ON pyexec_jobs (lease_until) WHERE status IN ('pending', 'running') AND owner <> '';
	CREATE TABLE pyexec_job_output (
		job_id  text NOT NULL REFERENCES pyexec_jobs (id) ON DELETE CASCADE,
		stream  smallint NOT NULL,
		off     bigint NOT NULL,
		data    bytea NOT NULL,
		PRIMARY KEY (job_id, stream, off)
	);
	CREATE TABLE pyexec_nodes (
		id            text PRIMARY KEY,
		addr          text NOT NULL DEFAULT '',
		version       text NOT NULL DEFAULT '',
		started_at    timestamptz NOT NULL DEFAULT now(),
		heartbeat_at  timestamptz NOT NULL DEFAULT now(),
		free_slots    integer NOT NULL DEFAULT 0,
		max_slots     integer NOT NULL DEFAULT 0,
		warm_envs     text[] NOT NULL DEFAULT '{}'
	);`,
	// Live Python sessions: a name is claimed once across the replica set
	// (the primary key); owner is the node whose process holds it.
	`CREATE TABLE pyexec_sessions (
		name            text PRIMARY KEY,
		owner           text NOT NULL,
		label           text NOT NULL DEFAULT '',
		settings        text NOT NULL,
		status          text NOT NULL,
		lost_reason     text NOT NULL DEFAULT '',
		lost_detail     text NOT NULL DEFAULT '',
		execution_count integer NOT NULL DEFAULT 0,
		created_at      bigint NOT NULL,
		last_used_at    bigint NOT NULL,
		peak_memory     bigint NOT NULL DEFAULT 0
	);
	CREATE INDEX pyexec_sessions_owner ON pyexec_sessions (owner) WHERE status IN ('idle', 'busy');`,
}

// Version is the schema version this binary migrates to.
func Version() int { return len(migrations) }

func migrate(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock)
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS pyexec_schema (version integer NOT NULL)`); err != nil {
		return fmt.Errorf("create the schema version table: %w", err)
	}
	var version int
	err = conn.QueryRowContext(ctx, `SELECT version FROM pyexec_schema`).Scan(&version)
	switch {
	case err == sql.ErrNoRows:
		if _, err := conn.ExecContext(ctx, `INSERT INTO pyexec_schema (version) VALUES (0)`); err != nil {
			return fmt.Errorf("initialise the schema version: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read the schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this pyexec knows (%d): refusing to touch it; upgrade pyexec", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE pyexec_schema SET version = $1`, i+1); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: set version: %w", i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: commit: %w", i+1, err)
		}
	}
	return nil
}

package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go
)

// store keeps job metadata in SQLite. Why two handles: SQLite allows one
// writer at a time, so all writes go through a single connection (no
// SQLITE_BUSY between our own goroutines), while WAL mode lets reads proceed
// on their own connections without waiting for that writer.
type store struct {
	w *sql.DB // exactly one connection: every write
	r *sql.DB // read-only pool
}

// migrations are applied in order; PRAGMA user_version records how many ran.
// Append only: never edit a migration that has shipped.
var migrations = []string{
	`CREATE TABLE jobs (
		id                  TEXT PRIMARY KEY,
		label               TEXT NOT NULL DEFAULT '',
		status              TEXT NOT NULL,
		created_at          INTEGER NOT NULL,
		started_at          INTEGER,
		finished_at         INTEGER,
		timed_out           INTEGER NOT NULL DEFAULT 0,
		exit_code           INTEGER,
		error               TEXT NOT NULL DEFAULT '',
		pid                 INTEGER NOT NULL DEFAULT 0,
		timeout_seconds     REAL NOT NULL DEFAULT 0,
		request             TEXT NOT NULL,
		run_info            TEXT,
		progress            TEXT,
		stdout_bytes        INTEGER NOT NULL DEFAULT 0,
		stderr_bytes        INTEGER NOT NULL DEFAULT 0,
		stdout_truncated    INTEGER NOT NULL DEFAULT 0,
		stderr_truncated    INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX jobs_created ON jobs(created_at DESC);
	CREATE INDEX jobs_status ON jobs(status, created_at DESC);`,
	// The Manager (process) running a job: see owner.go.
	`ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';`,
	// Live Python sessions (sessions.go): the restart record. Names are
	// per owner (each process sharing the state dir has its own).
	`CREATE TABLE sessions (
		owner           TEXT NOT NULL,
		name            TEXT NOT NULL,
		label           TEXT NOT NULL DEFAULT '',
		settings        TEXT NOT NULL,
		status          TEXT NOT NULL,
		lost_reason     TEXT NOT NULL DEFAULT '',
		lost_detail     TEXT NOT NULL DEFAULT '',
		execution_count INTEGER NOT NULL DEFAULT 0,
		created_at      INTEGER NOT NULL,
		last_used_at    INTEGER NOT NULL,
		peak_memory     INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (owner, name)
	);`,
}

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	// NORMAL is durable against process crashes in WAL mode; only an OS
	// crash can lose the last transactions, which is fine for job metadata.
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// openStore opens (creating if needed) the database at path and migrates it.
func openStore(ctx context.Context, path string) (*store, error) {
	// Create it private: it holds the code of every job. SQLite gives its
	// -wal and -shm files the database file's permissions.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
		f.Close()
	}
	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("open job store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("migrate job store %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open job store %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	return &store{w: w, r: r}, nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this pyexec knows (%d): refusing to touch it", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: set version: %w", i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: commit: %w", i+1, err)
		}
	}
	return nil
}

func (s *store) close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

func nanos(t time.Time) int64 { return t.UnixNano() }

func nullNanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

// jsonOrNil encodes v, or returns SQL NULL for nil (including a nil
// pointer in the interface: a job without progress has no progress).
func jsonOrNil(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// redact returns a copy of req whose env_vars values are replaced: the store
// is a plain file and those values are often credentials.
func redact(req engine.Request) engine.Request {
	req.EnvVars = engine.RedactEnv(req.EnvVars)
	return req
}

func (s *store) insert(ctx context.Context, j *Job, owner string) error {
	req, err := json.Marshal(redact(*j.Request))
	if err != nil {
		return fmt.Errorf("encode request of job %s: %w", j.ID, err)
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO jobs (id, label, status, created_at, timeout_seconds, request, owner)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, j.ID, j.Label, string(j.Status), nanos(j.CreatedAt), j.TimeoutSeconds, string(req), owner)
	if err != nil {
		return fmt.Errorf("insert job %s: %w", j.ID, err)
	}
	return nil
}

// update writes every mutable field of j. Called on state transitions and
// throttled progress only, never per output chunk.
func (s *store) update(ctx context.Context, j *Job) error {
	progress, err := jsonOrNil(j.Progress)
	if err != nil {
		return fmt.Errorf("encode progress of job %s: %w", j.ID, err)
	}
	var run any
	if j.Run != nil {
		if run, err = jsonOrNil(j.Run); err != nil {
			return fmt.Errorf("encode run info of job %s: %w", j.ID, err)
		}
	}
	var exit any
	if j.ExitCode != nil {
		exit = *j.ExitCode
	}
	res, err := s.w.ExecContext(ctx, `UPDATE jobs SET status=?, started_at=?, finished_at=?, timed_out=?,
		exit_code=?, error=?, pid=?, run_info=?, progress=?, stdout_bytes=?, stderr_bytes=?,
		stdout_truncated=?, stderr_truncated=? WHERE id=?`,
		string(j.Status), nullNanos(j.StartedAt), nullNanos(j.FinishedAt), j.TimedOut,
		exit, j.Error, j.PID, run, progress, j.StdoutBytes, j.StderrBytes,
		j.StdoutTruncated, j.StderrTruncated, j.ID)
	if err != nil {
		return fmt.Errorf("update job %s: %w", j.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("update job %s: %w", j.ID, ErrNotFound)
	}
	return nil
}

const jobColumns = `id, label, status, created_at, started_at, finished_at, timed_out, exit_code,
	error, pid, timeout_seconds, run_info, progress, stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated`

type scanner interface{ Scan(dest ...any) error }

// scanJob reads jobColumns (and request when withRequest), then extra
// destinations for columns a query adds after them.
func scanJob(sc scanner, withRequest bool, extra ...any) (Job, error) {
	var (
		j                          Job
		status                     string
		created                    int64
		started, finished, exit    sql.NullInt64
		runInfo, progress, request sql.NullString
		dest                       = []any{}
	)
	dest = append(dest, &j.ID, &j.Label, &status, &created, &started, &finished, &j.TimedOut, &exit,
		&j.Error, &j.PID, &j.TimeoutSeconds, &runInfo, &progress, &j.StdoutBytes, &j.StderrBytes,
		&j.StdoutTruncated, &j.StderrTruncated)
	if withRequest {
		dest = append(dest, &request)
	}
	dest = append(dest, extra...)
	if err := sc.Scan(dest...); err != nil {
		return Job{}, err
	}
	j.Status = Status(status)
	j.CreatedAt = time.Unix(0, created).UTC()
	if started.Valid {
		t := time.Unix(0, started.Int64).UTC()
		j.StartedAt = &t
	}
	if finished.Valid {
		t := time.Unix(0, finished.Int64).UTC()
		j.FinishedAt = &t
	}
	if exit.Valid {
		c := int(exit.Int64)
		j.ExitCode = &c
	}
	if runInfo.Valid {
		j.Run = new(RunInfo)
		if err := json.Unmarshal([]byte(runInfo.String), j.Run); err != nil {
			return Job{}, fmt.Errorf("decode run info of job %s: %w", j.ID, err)
		}
	}
	if progress.Valid && progress.String != "null" { // "null": written before jsonOrNil knew nil pointers
		j.Progress = new(Progress)
		if err := json.Unmarshal([]byte(progress.String), j.Progress); err != nil {
			return Job{}, fmt.Errorf("decode progress of job %s: %w", j.ID, err)
		}
	}
	if request.Valid {
		j.Request = new(engine.Request)
		if err := json.Unmarshal([]byte(request.String), j.Request); err != nil {
			return Job{}, fmt.Errorf("decode request of job %s: %w", j.ID, err)
		}
	}
	return j, nil
}

func (s *store) get(ctx context.Context, id string) (Job, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+jobColumns+`, request FROM jobs WHERE id=?`, id)
	j, err := scanJob(row, true)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("read job %s: %w", id, err)
	}
	return j, nil
}

func (s *store) list(ctx context.Context, f Filter) (JobList, error) {
	var where []string
	var args []any
	if f.Status != "" {
		where = append(where, "status=?")
		args = append(args, string(f.Status))
	}
	if f.Label != "" {
		where = append(where, "label=?")
		args = append(args, f.Label)
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	var out JobList
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM jobs`+cond, args...).Scan(&out.Total); err != nil {
		return JobList{}, fmt.Errorf("count jobs: %w", err)
	}
	cols := jobColumns
	if f.IncludeRequest {
		cols += ", request"
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+cols+` FROM jobs`+cond+` ORDER BY created_at DESC, rowid DESC LIMIT ?`,
		append(args, limit)...)
	if err != nil {
		return JobList{}, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	out.Jobs = []Job{}
	for rows.Next() {
		j, err := scanJob(rows, f.IncludeRequest)
		if err != nil {
			return JobList{}, fmt.Errorf("list jobs: %w", err)
		}
		out.Jobs = append(out.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return JobList{}, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// unfinished returns the ids of pending and running jobs of other owners,
// grouped by owner.
func (s *store) unfinished(ctx context.Context, except string) (map[string][]string, error) {
	rows, err := s.w.QueryContext(ctx, `SELECT owner, id FROM jobs WHERE status IN ('pending','running') AND owner != ?`, except)
	if err != nil {
		return nil, fmt.Errorf("find unfinished jobs: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var owner, id string
		if err := rows.Scan(&owner, &id); err != nil {
			return nil, fmt.Errorf("find unfinished jobs: %w", err)
		}
		out[owner] = append(out[owner], id)
	}
	return out, rows.Err()
}

// markAbandoned fails one unfinished job after a restart, recording the log
// sizes found on disk (sizes are only persisted on transitions).
func (s *store) markAbandoned(ctx context.Context, id string, at time.Time, stdout, stderr logState) error {
	_, err := s.w.ExecContext(ctx, `UPDATE jobs SET status='failed', error=?, finished_at=?, pid=0,
		stdout_bytes=max(stdout_bytes, ?), stderr_bytes=max(stderr_bytes, ?),
		stdout_truncated=(stdout_truncated OR ?), stderr_truncated=(stderr_truncated OR ?)
		WHERE id=? AND status IN ('pending','running')`,
		MsgRestarted, nanos(at), stdout.size, stderr.size, stdout.truncated, stderr.truncated, id)
	if err != nil {
		return fmt.Errorf("mark job %s failed after restart: %w", id, err)
	}
	return nil
}

// pruneCandidates lists finished jobs that opts allows removing.
func (s *store) pruneCandidates(ctx context.Context, opts PruneOptions, now time.Time) ([]string, error) {
	statuses := []string{}
	if !opts.KeepCompleted {
		statuses = append(statuses, "'completed'")
	}
	if !opts.KeepFailed {
		statuses = append(statuses, "'failed'", "'cancelled'")
	}
	if len(statuses) == 0 {
		return nil, nil
	}
	q := `SELECT id FROM jobs WHERE status IN (` + strings.Join(statuses, ",") + `)`
	var args []any
	if opts.MaxAgeHours > 0 {
		// Converted with a cap: max_age_hours 1e300 is "older than the
		// longest Duration", not a wrapped (future) cutoff.
		cutoff := now.Add(-engine.SecondsUpTo(opts.MaxAgeHours*3600, 0))
		q += ` AND coalesce(finished_at, created_at) < ?`
		args = append(args, nanos(cutoff))
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("select jobs to prune: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("select jobs to prune: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// deleteFinished removes the given jobs' rows, re-checking in the same
// statement that each is still finished.
func (s *store) deleteFinished(ctx context.Context, ids []string) (int, error) {
	removed := 0
	for len(ids) > 0 {
		batch := ids
		if len(batch) > 500 {
			batch = batch[:500]
		}
		ids = ids[len(batch):]
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id
		}
		res, err := s.w.ExecContext(ctx, `DELETE FROM jobs WHERE status IN ('completed','failed','cancelled') AND id IN (?`+
			strings.Repeat(",?", len(batch)-1)+`)`, args...)
		if err != nil {
			return removed, fmt.Errorf("delete pruned jobs: %w", err)
		}
		n, _ := res.RowsAffected()
		removed += int(n)
	}
	return removed, nil
}

func (s *store) count(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM jobs`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count jobs: %w", err)
	}
	return n, nil
}

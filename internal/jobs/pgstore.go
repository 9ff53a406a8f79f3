package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/pgdb"
)

// pgStore keeps job metadata, the shared queue and flushed output in
// PostgreSQL, for replicas of `pyexec serve` sharing one database.
//
// Every write a node makes to a job it runs is fenced: it only applies
// while the row still names this node as owner with the epoch of its claim
// and the job is unfinished. A node whose lease expired (another node
// marked the job node_lost) gets errFenced and stops the run, so a job's
// result is written by at most one node and no job runs twice.
type pgStore struct {
	db    *pgdb.DB
	node  string        // this node's id: the owner it writes as
	bound time.Duration // lease length (Config.NodeLostAfter)
}

var _ jobStore = (*pgStore)(nil)

// errFenced is returned by a fenced write that no longer applies: the job
// is final or owned by another claim.
var errFenced = errors.New("the job's lease is no longer ours (it was marked lost or finished elsewhere)")

// Output streams as stored in pyexec_job_output.stream.
const (
	streamStdout = 1
	streamStderr = 2
)

// maxChunkRow bounds one output row.
const maxChunkRow = 1 << 20

func (s *pgStore) close() error { return nil } // the DB is closed by whoever opened it

func interval(d time.Duration) string { return fmt.Sprintf("%d milliseconds", d.Milliseconds()) }

// insert adds a job. A job with an owner (a synchronous run: it runs where
// it landed) is claimed at once with epoch 1; one without waits in the
// shared queue with its full request (env_vars included) in run_request,
// which is cleared when the job ends.
func (s *pgStore) insert(ctx context.Context, j *Job, owner string) error {
	req, err := json.Marshal(redact(*j.Request))
	if err != nil {
		return fmt.Errorf("encode request of job %s: %w", j.ID, err)
	}
	var runReq any
	epoch := int64(0)
	var lease any
	if !j.quiet { // a background job: any replica may end up running it
		full, err := json.Marshal(j.Request)
		if err != nil {
			return fmt.Errorf("encode request of job %s: %w", j.ID, err)
		}
		runReq = string(full)
	}
	if owner != "" {
		epoch, lease = 1, interval(s.bound)
		j.epoch = 1
	}
	// A queued job wakes the replicas' claimers in the same statement.
	// Committed as every write here (see update).
	queueNote := ""
	if owner == "" {
		queueNote = queueChannel
	}
	_, err = s.db.Fast.ExecContext(ctx, `WITH i AS (INSERT INTO pyexec_jobs (id, label, status, created_at, timeout_seconds, request, owner, epoch,
		lease_until, env_key, run_request)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now() + $9::interval, $10, $11) RETURNING 1)
		SELECT count(*) FROM i LEFT JOIN LATERAL (SELECT pg_notify($12, '') WHERE $12 <> '') AS n ON true`,
		j.ID, j.Label, string(j.Status), nanos(j.CreatedAt), j.TimeoutSeconds, string(req), owner, epoch, lease, envKey(*j.Request), runReq, queueNote)
	if err != nil {
		return fmt.Errorf("insert job %s: %w", j.ID, err)
	}
	return nil
}

// enqueue adds a background job in one round trip: the queue-length check
// (refused past maxQueue), the choice between running it here (nothing is
// queued and here says this node has a free slot: claimed at once with
// epoch 1) and leaving it in the shared queue (whose claimers it wakes),
// and the insert. It reports whether the job was inserted, owned by this
// node, and how many jobs were queued before it.
func (s *pgStore) enqueue(ctx context.Context, j *Job, here bool, maxQueue int) (inserted, owned bool, queued int, err error) {
	req, err := json.Marshal(redact(*j.Request))
	if err != nil {
		return false, false, 0, fmt.Errorf("encode request of job %s: %w", j.ID, err)
	}
	full, err := json.Marshal(j.Request)
	if err != nil {
		return false, false, 0, fmt.Errorf("encode request of job %s: %w", j.ID, err)
	}
	var owner sql.NullString
	err = s.db.Fast.QueryRowContext(ctx, `WITH q AS (SELECT count(*) AS n FROM pyexec_jobs WHERE status='pending' AND owner=''),
		i AS (INSERT INTO pyexec_jobs (id, label, status, created_at, timeout_seconds, request, owner, epoch,
			lease_until, env_key, run_request)
			SELECT $1, $2, $3, $4, $5, $6,
				CASE WHEN q.n = 0 AND $7 THEN $8 ELSE '' END,
				CASE WHEN q.n = 0 AND $7 THEN 1 ELSE 0 END,
				CASE WHEN q.n = 0 AND $7 THEN now() + $9::interval END,
				$10, $11
			FROM q WHERE q.n < $12 RETURNING owner)
		SELECT q.n, i.owner FROM q LEFT JOIN i ON true
		LEFT JOIN LATERAL (SELECT pg_notify($13, '') WHERE i.owner = '') AS nt ON true`,
		j.ID, j.Label, string(j.Status), nanos(j.CreatedAt), j.TimeoutSeconds, string(req), here, s.node,
		interval(s.bound), envKey(*j.Request), string(full), maxQueue, queueChannel).Scan(&queued, &owner)
	if err != nil {
		return false, false, 0, fmt.Errorf("insert job %s: %w", j.ID, err)
	}
	if !owner.Valid {
		return false, false, queued, nil
	}
	if owner.String != "" {
		j.epoch = 1
		return true, true, queued, nil
	}
	return true, false, queued, nil
}

// update writes every mutable field of j, fenced by this node's claim.
func (s *pgStore) update(ctx context.Context, j *Job) error {
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
	final := j.Status.Terminal()
	// One round trip: the fenced update and, when it applied, the
	// notification other replicas wait on. Committed like the SQLite
	// store's writes (synchronous=NORMAL): safe when pyexec dies; a crash
	// of the database server itself can lose the last ~0.6 s of them (a
	// job whose final state is lost ends node_lost when its lease runs out).
	note := s.notePayload(j, changeNote{Job: j.ID, Status: j.Status, Done: final})
	// The output the job's flusher had not written yet (final states).
	streams, offs, data := []int16{}, []int64{}, [][]byte{}
	var flushed []int64 // NULL: unchanged
	if t := j.tail; t != nil {
		for _, p := range t.parts {
			streams, offs, data = append(streams, p.stream), append(offs, p.off), append(data, p.data)
		}
		flushed = t.sizes[:]
	}
	var n int
	err = s.db.Fast.QueryRowContext(ctx, `WITH u AS (UPDATE pyexec_jobs SET status=$1, started_at=$2, finished_at=$3, timed_out=$4,
		exit_code=$5, error=$6, pid=$7, run_info=$8, progress=$9, stdout_bytes=$10, stderr_bytes=$11,
		stdout_truncated=$12, stderr_truncated=$13,
		run_request = CASE WHEN $16 THEN NULL ELSE run_request END,
		lease_until = CASE WHEN $16 THEN NULL ELSE lease_until END,
		stdout_flushed = coalesce(($20::bigint[])[1], stdout_flushed),
		stderr_flushed = coalesce(($20::bigint[])[2], stderr_flushed)
		WHERE id=$14 AND owner=$15 AND epoch=$17 AND status IN ('pending','running') RETURNING id),
		i AS (INSERT INTO pyexec_job_output (job_id, stream, off, data)
			SELECT u.id, p.stream, p.off, p.data FROM u, unnest($21::smallint[], $22::bigint[], $23::bytea[]) AS p(stream, off, data)
			ON CONFLICT DO NOTHING)
		SELECT count(*) FROM u LEFT JOIN LATERAL (SELECT pg_notify($18, $19) WHERE $19 <> '') AS n ON true`,
		string(j.Status), nullNanos(j.StartedAt), nullNanos(j.FinishedAt), j.TimedOut,
		exit, j.Error, j.PID, run, progress, j.StdoutBytes, j.StderrBytes,
		j.StdoutTruncated, j.StderrTruncated, j.ID, s.node, final, j.epoch, changeChannel, note,
		flushed, streams, offs, data).Scan(&n)
	if err != nil {
		return fmt.Errorf("update job %s: %w", j.ID, err)
	}
	if n == 0 {
		if _, err := s.get(ctx, j.ID); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("update job %s: %w", j.ID, ErrNotFound)
		}
		return fmt.Errorf("update job %s: %w", j.ID, errFenced)
	}
	return nil
}

func (s *pgStore) get(ctx context.Context, id string) (Job, error) {
	j, _, err := s.getShared(ctx, id)
	return j, err
}

// sharedRow is what readers on other nodes need besides the Job.
type sharedRow struct {
	owner                        string
	stdoutFlushed, stderrFlushed int64
	cancelRequested              bool
}

func (s *pgStore) getShared(ctx context.Context, id string) (Job, sharedRow, error) {
	row := s.db.SQL.QueryRowContext(ctx, `SELECT `+jobColumns+`, request, owner, stdout_flushed, stderr_flushed, cancel_requested
		FROM pyexec_jobs WHERE id=$1`, id)
	var sr sharedRow
	j, err := scanJob(row, true, &sr.owner, &sr.stdoutFlushed, &sr.stderrFlushed, &sr.cancelRequested)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, sr, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, sr, fmt.Errorf("read job %s: %w", id, err)
	}
	return j, sr, nil
}

func (s *pgStore) list(ctx context.Context, f Filter) (JobList, error) {
	var where []string
	var args []any
	if f.Status != "" {
		args = append(args, string(f.Status))
		where = append(where, fmt.Sprintf("status=$%d", len(args)))
	}
	if f.Label != "" {
		args = append(args, f.Label)
		where = append(where, fmt.Sprintf("label=$%d", len(args)))
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
	if err := s.db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM pyexec_jobs`+cond, args...).Scan(&out.Total); err != nil {
		return JobList{}, fmt.Errorf("count jobs: %w", err)
	}
	cols := jobColumns
	if f.IncludeRequest {
		cols += ", request"
	}
	rows, err := s.db.SQL.QueryContext(ctx, `SELECT `+cols+` FROM pyexec_jobs`+cond+
		fmt.Sprintf(` ORDER BY created_at DESC, seq DESC LIMIT $%d`, len(args)+1), append(args, limit)...)
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

// unfinished is not how a shared store finds dead owners (leases are: see
// reapExpired), so it reports none.
func (s *pgStore) unfinished(context.Context, string) (map[string][]string, error) {
	return map[string][]string{}, nil
}

func (s *pgStore) markAbandoned(ctx context.Context, id string, at time.Time, stdout, stderr logState) error {
	_, err := s.db.SQL.ExecContext(ctx, `UPDATE pyexec_jobs SET status='failed', error=$1, finished_at=$2, pid=0,
		stdout_bytes=GREATEST(stdout_bytes, $3), stderr_bytes=GREATEST(stderr_bytes, $4),
		stdout_truncated=(stdout_truncated OR $5), stderr_truncated=(stderr_truncated OR $6),
		run_request=NULL, lease_until=NULL
		WHERE id=$7 AND status IN ('pending','running')`,
		MsgRestarted, nanos(at), stdout.size, stderr.size, stdout.truncated, stderr.truncated, id)
	if err != nil {
		return fmt.Errorf("mark job %s failed after restart: %w", id, err)
	}
	return nil
}

func (s *pgStore) pruneCandidates(ctx context.Context, opts PruneOptions, now time.Time) ([]string, error) {
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
	q := `SELECT id FROM pyexec_jobs WHERE status IN (` + strings.Join(statuses, ",") + `)`
	var args []any
	if opts.MaxAgeHours > 0 {
		cutoff := now.Add(-time.Duration(opts.MaxAgeHours * float64(time.Hour)))
		q += ` AND coalesce(finished_at, created_at) < $1`
		args = append(args, nanos(cutoff))
	}
	rows, err := s.db.SQL.QueryContext(ctx, q, args...)
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

func (s *pgStore) deleteFinished(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res, err := s.db.Fast.ExecContext(ctx, `DELETE FROM pyexec_jobs WHERE status IN ('completed','failed','cancelled') AND id = ANY($1)`, ids)
	if err != nil {
		return 0, fmt.Errorf("delete pruned jobs: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

func (s *pgStore) count(ctx context.Context) (int, error) {
	var n int
	if err := s.db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM pyexec_jobs`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count jobs: %w", err)
	}
	return n, nil
}

// affinityWait is how long a queued job waits for a free node that has its
// environment built before any free node may take it.
const affinityWait = 500 * time.Millisecond

// claim takes the oldest queued job this node should run, or returns
// sql.ErrNoRows. Why SKIP LOCKED: concurrent claimers each lock a
// different row instead of queueing behind one another. A job whose
// environment is warm here goes first; a job whose environment is warm on
// another live node with free slots is left to that node for affinityWait.
func (s *pgStore) claim(ctx context.Context, warm []string) (Job, engine.Request, error) {
	if warm == nil {
		warm = []string{}
	}
	row := s.db.Fast.QueryRowContext(ctx, `UPDATE pyexec_jobs SET owner=$1, epoch=epoch+1, lease_until=now() + $2::interval
		WHERE id = (
			SELECT j.id FROM pyexec_jobs j
			WHERE j.status='pending' AND j.owner=''
			  AND (j.env_key = '' OR j.env_key = ANY($3)
			       OR j.created_at < $4
			       OR NOT EXISTS (SELECT 1 FROM pyexec_nodes n WHERE n.id <> $1 AND n.free_slots > 0
			                      AND n.heartbeat_at > now() - $2::interval AND j.env_key = ANY(n.warm_envs)))
			ORDER BY (j.env_key <> '' AND j.env_key = ANY($3)) DESC, j.seq
			LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+jobColumns+`, run_request, epoch`,
		s.node, interval(s.bound), warm, nanos(time.Now().Add(-affinityWait)))
	var runReq sql.NullString
	var epoch int64
	j, err := scanJob(row, false, &runReq, &epoch)
	if err != nil {
		return Job{}, engine.Request{}, err
	}
	j.epoch = epoch
	var req engine.Request
	if !runReq.Valid {
		return j, req, fmt.Errorf("job %s has no request to run", j.ID)
	}
	if err := json.Unmarshal([]byte(runReq.String), &req); err != nil {
		return j, req, fmt.Errorf("decode request of job %s: %w", j.ID, err)
	}
	redacted := redact(req)
	j.Request = &redacted
	return j, req, nil
}

// release puts a claimed job that never started back in the queue (this
// node is shutting down).
func (s *pgStore) release(ctx context.Context, id string, epoch int64) error {
	_, err := s.db.Fast.ExecContext(ctx, `UPDATE pyexec_jobs SET owner='', lease_until=NULL
		WHERE id=$1 AND owner=$2 AND epoch=$3 AND status='pending'`, id, s.node, epoch)
	return err
}

// lease is one of this node's unfinished jobs as the store sees it.
type lease struct {
	epoch           int64
	cancelRequested bool
}

// renew extends the leases of the jobs this node holds (ids) and returns
// those still unfinished in the store. Only held jobs: a job whose final
// state the database lost (it crashed) is not kept alive by a node that
// no longer runs it; its lease runs out and it ends node_lost.
func (s *pgStore) renew(ctx context.Context, ids []string) (map[string]lease, error) {
	if ids == nil {
		ids = []string{}
	}
	rows, err := s.db.Fast.QueryContext(ctx, `UPDATE pyexec_jobs SET lease_until=now() + $2::interval
		WHERE owner=$1 AND id = ANY($3) AND status IN ('pending','running') RETURNING id, epoch, cancel_requested`, s.node, interval(s.bound), ids)
	if err != nil {
		return nil, fmt.Errorf("renew job leases: %w", err)
	}
	defer rows.Close()
	out := map[string]lease{}
	for rows.Next() {
		var id string
		var l lease
		if err := rows.Scan(&id, &l.epoch, &l.cancelRequested); err != nil {
			return nil, fmt.Errorf("renew job leases: %w", err)
		}
		out[id] = l
	}
	return out, rows.Err()
}

// reapExpired fails the unfinished jobs whose lease ran out (their node
// went silent past the bound) and returns their ids.
func (s *pgStore) reapExpired(ctx context.Context, now time.Time) ([]string, error) {
	rows, err := s.db.SQL.QueryContext(ctx, `UPDATE pyexec_jobs SET status='failed', error=$1, finished_at=$2, pid=0,
		run_request=NULL, lease_until=NULL,
		stdout_bytes=GREATEST(stdout_bytes, stdout_flushed), stderr_bytes=GREATEST(stderr_bytes, stderr_flushed)
		WHERE status IN ('pending','running') AND owner <> '' AND lease_until < now() RETURNING id`,
		MsgNodeLost, nanos(now))
	if err != nil {
		return nil, fmt.Errorf("fail jobs of lost nodes: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// cancelQueued cancels a job still waiting in the shared queue; ok is
// false when it is not (any more) there.
func (s *pgStore) cancelQueued(ctx context.Context, id string, now time.Time) (bool, error) {
	res, err := s.db.SQL.ExecContext(ctx, `UPDATE pyexec_jobs SET status='cancelled', error=$2, finished_at=$3, run_request=NULL
		WHERE id=$1 AND status='pending' AND owner=''`, id, MsgCancelled, nanos(now))
	if err != nil {
		return false, fmt.Errorf("cancel job %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// requestCancel asks the owner of an unfinished job to cancel it (it also
// learns it at its next lease renewal if the notification is missed).
func (s *pgStore) requestCancel(ctx context.Context, id string) error {
	_, err := s.db.Fast.ExecContext(ctx, `UPDATE pyexec_jobs SET cancel_requested=true WHERE id=$1 AND status IN ('pending','running')`, id)
	if err != nil {
		return fmt.Errorf("cancel job %s: %w", id, err)
	}
	return nil
}

// flushPart is one stream's bytes to append at off.
type flushPart struct {
	stream int16
	off    int64
	data   []byte
}

// flush appends output rows, records the new flushed sizes and byte
// counts (fenced by this node's claim) and notifies readers, in one
// statement.
func (s *pgStore) flush(ctx context.Context, id string, epoch int64, parts []flushPart, stdout, stderr int64, j Job) error {
	streams := make([]int16, len(parts))
	offs := make([]int64, len(parts))
	data := make([][]byte, len(parts))
	for i, p := range parts {
		streams[i], offs[i], data[i] = p.stream, p.off, p.data
	}
	note := s.notePayload(&j, changeNote{Job: id, Status: j.Status, Output: true})
	var n int
	err := s.db.Fast.QueryRowContext(ctx, `WITH u AS (
			UPDATE pyexec_jobs SET stdout_flushed=$3, stderr_flushed=$4,
				stdout_bytes=$5, stderr_bytes=$6, stdout_truncated=$7, stderr_truncated=$8
			WHERE id=$1 AND owner=$2 AND epoch=$9 AND status IN ('pending','running') RETURNING id),
		i AS (INSERT INTO pyexec_job_output (job_id, stream, off, data)
			SELECT u.id, p.stream, p.off, p.data FROM u, unnest($10::smallint[], $11::bigint[], $12::bytea[]) AS p(stream, off, data)
			ON CONFLICT DO NOTHING)
		SELECT count(*) FROM u LEFT JOIN LATERAL (SELECT pg_notify($13, $14) WHERE $14 <> '') AS n ON true`,
		id, s.node, stdout, stderr, j.StdoutBytes, j.StderrBytes, j.StdoutTruncated, j.StderrTruncated, epoch,
		streams, offs, data, changeChannel, note).Scan(&n)
	if err != nil {
		return fmt.Errorf("flush output of job %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("flush output of job %s: %w", id, errFenced)
	}
	return nil
}

// notePayload is the change notification of j ("" for a quiet job).
func (s *pgStore) notePayload(j *Job, n changeNote) string {
	if j.quiet {
		return ""
	}
	n.Node = s.node
	b, _ := json.Marshal(n)
	return string(b)
}

// readOutput returns up to n bytes of one stream from off.
func (s *pgStore) readOutput(ctx context.Context, id string, stream int16, off int64, n int64) ([]byte, error) {
	rows, err := s.db.SQL.QueryContext(ctx, `SELECT off, data FROM pyexec_job_output
		WHERE job_id=$1 AND stream=$2 AND off < $4 AND off + length(data) > $3 ORDER BY off`, id, stream, off, off+n)
	if err != nil {
		return nil, fmt.Errorf("read output of job %s: %w", id, err)
	}
	defer rows.Close()
	buf := make([]byte, 0, min(n, 1<<20))
	next := off
	for rows.Next() {
		var o int64
		var data []byte
		if err := rows.Scan(&o, &data); err != nil {
			return nil, fmt.Errorf("read output of job %s: %w", id, err)
		}
		if o > next {
			break // a hole cannot happen (flushes are contiguous); stop at it anyway
		}
		data = data[next-o:]
		if rest := off + n - next; int64(len(data)) > rest {
			data = data[:rest]
		}
		buf = append(buf, data...)
		next += int64(len(data))
	}
	return buf, rows.Err()
}

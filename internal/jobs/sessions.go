package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/session"
)

// The sessions table: where live Python sessions are recorded (see
// session.Store). It sits in the job store so that one database holds what
// a server promised to clients: on SQLite the restart record of this state
// directory, on PostgreSQL the names of the whole replica set and which
// node holds each.

// sessionStore implements session.Store on either database.
type sessionStore struct {
	w, r  *sql.DB
	pg    bool
	table string
	// scope, on SQLite, is the owner whose names these are: processes
	// sharing a state dir keep separate names ("" on PostgreSQL: one set).
	scope string
}

var _ session.Store = (*sessionStore)(nil)

// SessionStore is where the sessions of this Manager's server are
// recorded (session.Config.Store); its owner id is NodeID.
func (m *Manager) SessionStore() session.Store {
	if m.sh != nil {
		return &sessionStore{w: m.sh.db.SQL, r: m.sh.db.SQL, pg: true, table: "pyexec_sessions"}
	}
	st := m.store.(*store)
	return &sessionStore{w: st.w, r: st.r, table: "sessions", scope: m.owner}
}

// openStatuses are the statuses of a session that still runs.
const openStatuses = `('idle', 'busy', 'starting')`

const sessionColumns = `name, owner, label, settings, status, lost_reason, lost_detail, execution_count, created_at, last_used_at, peak_memory`

// q rewrites ? placeholders as PostgreSQL's $n.
func (s *sessionStore) q(query string) string {
	query = strings.ReplaceAll(query, "TABLE", s.table)
	if !s.pg {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// scoped adds the owner condition on SQLite.
func (s *sessionStore) scoped(where string, args []any) (string, []any) {
	if s.scope == "" {
		return where, args
	}
	return where + " AND owner = ?", append(args, s.scope)
}

func (s *sessionStore) Claim(ctx context.Context, rec session.Record) (session.Record, bool, error) {
	settings, err := json.Marshal(rec.Settings)
	if err != nil {
		return session.Record{}, false, fmt.Errorf("encode the settings of session %s: %w", rec.Name, err)
	}
	for range 3 {
		res, err := s.w.ExecContext(ctx, s.q(`INSERT INTO TABLE (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
			rec.Name, rec.Owner, rec.Label, string(settings), rec.Status, rec.LostReason, rec.LostDetail, rec.ExecutionCount,
			nanos(rec.CreatedAt), nanos(rec.LastUsedAt), rec.PeakMemory)
		if err != nil {
			return session.Record{}, false, fmt.Errorf("claim session %s: %w", rec.Name, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return session.Record{}, true, nil
		}
		have, ok, err := s.Get(ctx, rec.Name)
		if err != nil || ok {
			return have, false, err
		}
		// released between the insert and the read: try again
	}
	return session.Record{}, false, fmt.Errorf("claim session %s: the name keeps changing hands", rec.Name)
}

func (s *sessionStore) Save(ctx context.Context, rec session.Record) error {
	settings, err := json.Marshal(rec.Settings)
	if err != nil {
		return fmt.Errorf("encode the settings of session %s: %w", rec.Name, err)
	}
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE TABLE SET label=?, settings=?, status=?, lost_reason=?, lost_detail=?, execution_count=?,
		last_used_at=?, peak_memory=? WHERE name=? AND owner=? AND status IN `+openStatuses),
		rec.Label, string(settings), rec.Status, rec.LostReason, rec.LostDetail, rec.ExecutionCount,
		nanos(rec.LastUsedAt), rec.PeakMemory, rec.Name, rec.Owner)
	if err != nil {
		return fmt.Errorf("save session %s: %w", rec.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return session.ErrNotOwned
	}
	return nil
}

func (s *sessionStore) Get(ctx context.Context, name string) (session.Record, bool, error) {
	where, args := s.scoped(`name = ?`, []any{name})
	rec, err := scanSession(s.r.QueryRowContext(ctx, s.q(`SELECT `+sessionColumns+` FROM TABLE WHERE `+where), args...))
	if errors.Is(err, sql.ErrNoRows) {
		return session.Record{}, false, nil
	}
	if err != nil {
		return session.Record{}, false, fmt.Errorf("read session %s: %w", name, err)
	}
	return rec, true, nil
}

func (s *sessionStore) List(ctx context.Context) ([]session.Record, error) {
	where, args := s.scoped(`true`, nil)
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT `+sessionColumns+` FROM TABLE WHERE `+where+` ORDER BY created_at, name`), args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []session.Record
	for rows.Next() {
		rec, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

func (s *sessionStore) Release(ctx context.Context, name, owner string) (bool, error) {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM TABLE WHERE name=? AND owner=?`), name, owner)
	if err != nil {
		return false, fmt.Errorf("release session %s: %w", name, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (s *sessionStore) MarkLost(ctx context.Context, owners []string, reason, detail string) (int, error) {
	total := 0
	for _, owner := range owners {
		res, err := s.w.ExecContext(ctx, s.q(`UPDATE TABLE SET status=?, lost_reason=?, lost_detail=? WHERE owner=? AND status IN `+openStatuses),
			session.StatusLost, reason, detail, owner)
		if err != nil {
			return total, fmt.Errorf("mark the sessions of %s lost: %w", owner, err)
		}
		n, _ := res.RowsAffected()
		total += int(n)
	}
	return total, nil
}

func scanSession(row interface{ Scan(...any) error }) (session.Record, error) {
	var rec session.Record
	var settings string
	var created, used int64
	if err := row.Scan(&rec.Name, &rec.Owner, &rec.Label, &settings, &rec.Status, &rec.LostReason, &rec.LostDetail, &rec.ExecutionCount,
		&created, &used, &rec.PeakMemory); err != nil {
		return rec, err
	}
	if err := json.Unmarshal([]byte(settings), &rec.Settings); err != nil {
		return rec, fmt.Errorf("decode the settings of session %s: %w", rec.Name, err)
	}
	rec.CreatedAt, rec.LastUsedAt = time.Unix(0, created), time.Unix(0, used)
	return rec, nil
}

// sessionRestarted is the detail of a session whose process died.
const sessionRestarted = "the server restarted; sessions do not outlive the server process"

// recoverSessions takes over the sessions of dead processes that shared
// this state dir (SQLite): they are recorded lost (server_restarted) under
// this Manager's owner, so its server lists them and reports each once.
func (m *Manager) recoverSessions(ctx context.Context) error {
	st, ok := m.store.(*store)
	if !ok {
		return nil
	}
	rows, err := st.r.QueryContext(ctx, `SELECT DISTINCT owner FROM sessions WHERE owner <> ?`, m.owner)
	if err != nil {
		return fmt.Errorf("list session owners: %w", err)
	}
	var owners []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			rows.Close()
			return err
		}
		owners = append(owners, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, owner := range owners {
		dead, release, err := ownerDead(m.cfg.StateDir, owner)
		if err != nil || !dead {
			continue
		}
		err = func() error {
			defer release()
			tx, err := st.w.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET status=?, lost_reason=?, lost_detail=? WHERE owner=? AND status IN `+openStatuses,
				session.StatusLost, "server_restarted", sessionRestarted, owner); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE OR IGNORE sessions SET owner=? WHERE owner=?`, m.owner, owner); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE owner=?`, owner); err != nil {
				return err
			}
			return tx.Commit()
		}()
		if err != nil {
			return fmt.Errorf("take over the sessions of a dead process: %w", err)
		}
	}
	return nil
}

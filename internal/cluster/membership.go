// Package cluster is what makes identical `pyexec serve` replicas one
// service: node membership (heartbeats into PostgreSQL with free slots and
// built environments; silent nodes are dropped after a bound) and routing
// of requests that belong to one node (MCP sessions by their id; live
// Python sessions are found through the job store and forwarded by
// httpapi) to that node.
//
// There is no home-made consensus: PostgreSQL is the one shared engine,
// and the process supervisor (Kubernetes, systemd, compose) keeps the
// replicas running. The job queue, leases and fencing live with the jobs
// (internal/jobs); this package only knows nodes.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/pgdb"
)

// Status is what a node reports about itself at each heartbeat.
type Status struct {
	FreeSlots, MaxSlots int
	// WarmEnvs are keys of dependency environments built on this node; the
	// job queue prefers such a node for a job needing one.
	WarmEnvs []string
}

// Config configures a node's membership.
type Config struct {
	DB     *pgdb.DB
	NodeID string
	// Addr is the base URL other replicas reach this node at
	// (http://10.1.2.3:8080): requests for its MCP sessions are forwarded
	// there.
	Addr    string
	Version string
	// LostAfter is how long a node may miss heartbeats before it is
	// dropped (default 15 s). Heartbeats go every LostAfter/5.
	LostAfter time.Duration
	// Status, when set, is asked at every heartbeat.
	Status func() Status
	// OnLost is called with the ids of nodes this node found silent and
	// dropped: what a lost node owned besides jobs (whose leases expire on
	// their own) is marked lost here, i.e. its live Python sessions
	// (node_lost).
	OnLost func(ctx context.Context, nodeIDs []string)
	Logger *slog.Logger
}

// Node is a live member.
type Node struct {
	ID          string
	Addr        string
	Version     string
	StartedAt   time.Time
	HeartbeatAt time.Time
	Status
}

// Membership keeps this node in the nodes table while it runs.
type Membership struct {
	cfg  Config
	stop context.CancelFunc
	done chan struct{}

	mu    sync.Mutex
	cache map[string]cachedAddr
}

type cachedAddr struct {
	addr string
	ok   bool
	at   time.Time
}

// addrCacheTTL bounds how stale a routing decision may be; well under the
// heartbeat interval, so a dropped node stops receiving forwards quickly.
const addrCacheTTL = time.Second

// Join registers the node and starts heartbeating until Leave.
func Join(ctx context.Context, cfg Config) (*Membership, error) {
	if cfg.DB == nil || cfg.NodeID == "" {
		return nil, errors.New("cluster: Config.DB and Config.NodeID are required")
	}
	if cfg.LostAfter <= 0 {
		cfg.LostAfter = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = cfg.Logger.With("component", "cluster", "node", cfg.NodeID)
	m := &Membership{cfg: cfg, done: make(chan struct{}), cache: map[string]cachedAddr{}}
	if err := m.heartbeat(ctx); err != nil {
		return nil, fmt.Errorf("cluster: join: %w", err)
	}
	hctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	go m.loop(hctx)
	return m, nil
}

// NodeID is this node's id.
func (m *Membership) NodeID() string { return m.cfg.NodeID }

// Leave stops heartbeating and removes the node, so its sessions are
// known gone at once rather than after the bound.
func (m *Membership) Leave(ctx context.Context) error {
	m.stop()
	<-m.done
	_, err := m.cfg.DB.Fast.ExecContext(ctx, `DELETE FROM pyexec_nodes WHERE id=$1`, m.cfg.NodeID)
	return err
}

func (m *Membership) loop(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(max(m.cfg.LostAfter/5, 50*time.Millisecond))
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, m.cfg.LostAfter)
		err := m.heartbeat(hctx)
		if err == nil {
			err = m.sweep(hctx)
		}
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			m.cfg.Logger.Warn("heartbeat failed (will retry)", "err", err)
			failing = true
		case err == nil && failing:
			m.cfg.Logger.Info("heartbeats are back")
			failing = false
		}
	}
}

func (m *Membership) heartbeat(ctx context.Context) error {
	var st Status
	if m.cfg.Status != nil {
		st = m.cfg.Status()
	}
	if st.WarmEnvs == nil {
		st.WarmEnvs = []string{}
	}
	_, err := m.cfg.DB.Fast.ExecContext(ctx, `INSERT INTO pyexec_nodes (id, addr, version, free_slots, max_slots, warm_envs)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET addr=EXCLUDED.addr, heartbeat_at=now(), free_slots=EXCLUDED.free_slots,
			max_slots=EXCLUDED.max_slots, warm_envs=EXCLUDED.warm_envs`,
		m.cfg.NodeID, m.cfg.Addr, m.cfg.Version, st.FreeSlots, st.MaxSlots, st.WarmEnvs)
	return err
}

// sweep drops nodes silent past the bound.
func (m *Membership) sweep(ctx context.Context) error {
	rows, err := m.cfg.DB.Fast.QueryContext(ctx, `DELETE FROM pyexec_nodes WHERE heartbeat_at < now() - $1::interval RETURNING id`,
		fmt.Sprintf("%d milliseconds", m.cfg.LostAfter.Milliseconds()))
	if err != nil {
		return err
	}
	var lost []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		lost = append(lost, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(lost) > 0 {
		m.cfg.Logger.Warn("dropped nodes that went silent", "nodes", lost, "after", m.cfg.LostAfter)
		if m.cfg.OnLost != nil {
			m.cfg.OnLost(ctx, lost)
		}
	}
	return nil
}

// Nodes lists the live nodes, oldest first.
func (m *Membership) Nodes(ctx context.Context) ([]Node, error) {
	rows, err := m.cfg.DB.SQL.QueryContext(ctx, `SELECT id, addr, version, started_at, heartbeat_at, free_slots, max_slots, array_to_string(warm_envs, ',')
		FROM pyexec_nodes WHERE heartbeat_at >= now() - $1::interval ORDER BY started_at, id`,
		fmt.Sprintf("%d milliseconds", m.cfg.LostAfter.Milliseconds()))
	if err != nil {
		return nil, fmt.Errorf("cluster: list nodes: %w", err)
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		var n Node
		var warm string
		if err := rows.Scan(&n.ID, &n.Addr, &n.Version, &n.StartedAt, &n.HeartbeatAt, &n.FreeSlots, &n.MaxSlots, &warm); err != nil {
			return nil, fmt.Errorf("cluster: list nodes: %w", err)
		}
		if warm != "" {
			n.WarmEnvs = strings.Split(warm, ",")
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Addr returns the base URL of a live node; ok is false when the node is
// unknown or silent past the bound.
func (m *Membership) Addr(ctx context.Context, nodeID string) (addr string, ok bool, err error) {
	m.mu.Lock()
	c, hit := m.cache[nodeID]
	m.mu.Unlock()
	if hit && time.Since(c.at) < addrCacheTTL {
		return c.addr, c.ok, nil
	}
	err = m.cfg.DB.SQL.QueryRowContext(ctx, `SELECT addr FROM pyexec_nodes WHERE id=$1 AND heartbeat_at >= now() - $2::interval`,
		nodeID, fmt.Sprintf("%d milliseconds", m.cfg.LostAfter.Milliseconds())).Scan(&addr)
	switch {
	case errors.Is(err, sqlErrNoRows):
		addr, ok, err = "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("cluster: find node %s: %w", nodeID, err)
	default:
		ok = true
	}
	m.mu.Lock()
	m.cache[nodeID] = cachedAddr{addr: addr, ok: ok, at: time.Now()}
	if len(m.cache) > 1024 {
		clear(m.cache)
	}
	m.mu.Unlock()
	return addr, ok, nil
}

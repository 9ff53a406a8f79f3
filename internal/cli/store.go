package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/cluster"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/pgdb"
)

// storeFlags choose where `pyexec serve` keeps its jobs: SQLite in the
// state dir (one server), or a PostgreSQL database shared by identical
// replicas.
type storeFlags struct {
	store     string
	storeFile string
	advertise string
	nodeLost  float64
}

func (f *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.store, "store", "", "job store: sqlite (default, in the state dir) or a postgres://USER@HOST/DB URL shared by replicas; prefer PYEXEC_STORE or --store-file for a URL with a password (the command line is visible to other users)")
	fs.StringVar(&f.storeFile, "store-file", "", "file holding the job store URL (e.g. a mounted secret); PGPASSWORD and PGPASSFILE work too")
	fs.StringVar(&f.advertise, "advertise", "", "with a postgres store: URL other replicas reach this one at, http://HOST:PORT (default: the --listen address, or this host's name when listening on all interfaces)")
	fs.Float64Var(&f.nodeLost, "node-lost-after", jobs.DefaultNodeLostAfter.Seconds(), "with a postgres store: seconds a replica may stay silent before its running jobs fail as node_lost, its live Python sessions are lost (node_lost) and its MCP sessions are gone")
}

// url returns the store URL ("" for SQLite).
func (f *storeFlags) url() (string, error) {
	u := strings.TrimSpace(f.store)
	if f.storeFile != "" {
		if u != "" {
			return "", fmt.Errorf("--store and --store-file: give one of them")
		}
		data, err := os.ReadFile(f.storeFile)
		if err != nil {
			return "", fmt.Errorf("--store-file: %w", err)
		}
		u = strings.TrimSpace(string(data))
	}
	switch {
	case u == "" || u == "sqlite":
		return "", nil
	case pgdb.IsURL(u):
		return u, nil
	}
	return "", fmt.Errorf("--store: want sqlite or a postgres:// URL, got %q", pgdb.Redact(u))
}

// replica is this server's membership of a replica set.
type replica struct {
	db      *pgdb.DB
	nodeID  string
	members *cluster.Membership
	router  *cluster.Router
	// sessions routes session calls to the replica holding the session.
	sessions *httpapi.SessionRouting
}

// openReplica connects to the shared store, or returns nil for SQLite.
// jf is pointed at the database so the job manager shares it.
func (f *storeFlags) openReplica(ctx context.Context, jf *jobFlags, logger *slog.Logger) (*replica, error) {
	u, err := f.url()
	if err != nil || u == "" {
		return nil, err
	}
	if f.nodeLost <= 0 {
		return nil, fmt.Errorf("--node-lost-after: must be positive seconds, got %g", f.nodeLost)
	}
	db, err := pgdb.Open(ctx, u, pgdb.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	r := &replica{db: db, nodeID: newNodeID()}
	jf.db, jf.nodeID, jf.nodeLost = db, r.nodeID, seconds(f.nodeLost)
	return r, nil
}

// join registers the replica (reachable at the advertised address of ln)
// and builds its router.
func (r *replica) join(ctx context.Context, f *storeFlags, ln net.Listener, jx *executor.LocalJobs, logger *slog.Logger) error {
	addr, err := advertiseURL(f.advertise, ln.Addr().String())
	if err != nil {
		return err
	}
	m, sessions := jx.Manager(), jx.SessionManager()
	r.members, err = cluster.Join(ctx, cluster.Config{
		DB: r.db, NodeID: r.nodeID, Addr: addr, Version: Version, LostAfter: seconds(f.nodeLost), Logger: logger,
		// A silent node's jobs fail node_lost when their leases run out;
		// its sessions are recorded lost here.
		OnLost: func(ctx context.Context, nodes []string) {
			if n, err := sessions.MarkNodeLost(ctx, nodes); err != nil {
				logger.Warn("recording the sessions of lost nodes", "nodes", nodes, "err", err)
			} else if n > 0 {
				logger.Warn("sessions of nodes that went silent are lost", "count", n, "reason", "node_lost")
			}
		},
		Status: func() cluster.Status {
			free, total := m.Slots()
			return cluster.Status{FreeSlots: free, MaxSlots: total, WarmEnvs: m.WarmEnvs()}
		},
	})
	if err != nil {
		return err
	}
	r.router = cluster.NewRouter(r.members, logger)
	r.sessions = &httpapi.SessionRouting{Owner: sessions.Owner, NodeGone: sessions.MarkNodeLost}
	logger.Info("joined the replica set", "node", r.nodeID, "advertise", addr, "node_lost_after", seconds(f.nodeLost))
	return nil
}

// leave takes the replica out of the set (its sessions are gone at once)
// and closes the database.
func (r *replica) leave() {
	if r.members != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.members.Leave(ctx)
		cancel()
	}
	r.db.Close()
}

// newNodeID is a fresh id per process: a restarted replica is a new node,
// and the old one's jobs end as node_lost once its leases run out.
func newNodeID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// advertiseURL is the URL peers reach this replica at.
func advertiseURL(flagValue, listenAddr string) (string, error) {
	if flagValue != "" {
		if !strings.HasPrefix(flagValue, "http://") && !strings.HasPrefix(flagValue, "https://") {
			return "", fmt.Errorf("--advertise: want http://HOST:PORT, got %q", flagValue)
		}
		return strings.TrimRight(flagValue, "/"), nil
	}
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return "", fmt.Errorf("--advertise: cannot derive it from %q: %w", listenAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("--advertise: listening on all interfaces and no host name: %w", err)
		}
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

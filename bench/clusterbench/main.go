// Command clusterbench measures what scaling out costs, every figure a
// ratio or difference of cells measured in the same run, interleaved:
//
//	store     a job's store overhead: job-backed sync runs (what every MCP
//	          run_python is) and background jobs on PostgreSQL versus
//	          SQLite, with a no-op runner (the store alone) and with a
//	          real warm `print(1)`
//	balancer  POST /v1/run of print(1) straight to a replica versus
//	          through a round-robin Go reverse proxy and through nginx
//	          (with deploy/compose/nginx.conf) when it is installed
//	crossnode print-to-reader latency: a job prints time stamps, a reader
//	          long-polls them from another replica (and, for reference,
//	          from the owner)
//	writes    PostgreSQL transactions and notifications per job
//
// It needs a PostgreSQL server (-store or PYEXEC_TEST_PG_URL; it creates
// and drops a database of its own there). Loopback only; every loop is
// bounded.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/pyexec/pyexec/internal/cluster"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/pgdb"
)

func main() {
	launcher.MaybeRun()
	var (
		store  = flag.String("store", os.Getenv("PYEXEC_TEST_PG_URL"), "PostgreSQL server URL (a database is created and dropped there)")
		n      = flag.Int("n", 300, "operations per cell and round")
		rounds = flag.Int("rounds", 3, "interleaved rounds; each cell reports its best round's median")
		lines  = flag.Int("lines", 40, "lines of the cross-node latency job")
		dir    = flag.String("dir", "", "where workspace and state dirs are made (default: beside pyexec's default state dir)")
		only   = flag.String("sections", "store,trips,writes,balancer,crossnode", "comma-separated sections to run")
	)
	flag.Parse()
	if *store == "" {
		fmt.Fprintln(os.Stderr, "clusterbench: give -store postgres://... or set PYEXEC_TEST_PG_URL (scripts/pgtest.sh starts a server)")
		os.Exit(2)
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		want[strings.TrimSpace(s)] = true
	}
	if err := run(*store, *n, max(*rounds, 1), *lines, *dir, want); err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench:", err)
		os.Exit(1)
	}
}

func run(server string, n, rounds, lines int, dir string, want map[string]bool) error {
	ctx := context.Background()
	dbURL, drop, err := newDatabase(server)
	if err != nil {
		return err
	}
	defer drop()
	if dir == "" {
		dir = filepath.Dir(engine.DefaultStateDir())
		os.MkdirAll(dir, 0o755)
	}
	base, err := os.MkdirTemp(dir, "clusterbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	ws := filepath.Join(base, "ws")
	os.Mkdir(ws, 0o755)
	mk := func(name string) string { p := filepath.Join(base, name); os.Mkdir(p, 0o700); return p }

	eng, err := engine.New(engine.Config{Workspace: ws, StateDir: mk("state"), Warm: engine.WarmConfig{Spares: 2}})
	if err != nil {
		return err
	}
	defer eng.Close()
	local := executor.NewLocal(eng, "bench", 0)
	trips := &tripCounter{}
	db, err := pgdb.Open(ctx, dbURL, pgdb.Options{Tracer: trips})
	if err != nil {
		return err
	}
	defer db.Close()

	fmt.Printf("clusterbench: %d ops per cell, best of %d interleaved rounds; PostgreSQL %s\n\n", n, rounds, pgVersion(db))

	// --- store overhead
	noop := func(ctx context.Context, req engine.Request, o jobs.RunOptions, obs engine.Observer) (engine.Result, error) {
		obs.Started(1)
		obs.Output(engine.Stdout, []byte("1\n"))
		return engine.Result{ExitCode: 0, Stdout: "1\n"}, nil
	}
	sqliteNoop, err := jobs.Open(ctx, jobs.Config{StateDir: mk("j-sqlite-noop"), Run: noop, MaxQueue: 10000})
	if err != nil {
		return err
	}
	defer sqliteNoop.Close(ctx)
	pgNoop, err := jobs.Open(ctx, jobs.Config{StateDir: mk("j-pg-noop"), Run: noop, DB: db, MaxQueue: 10000})
	if err != nil {
		return err
	}
	defer pgNoop.Close(ctx)
	sqliteReal, err := executor.OpenLocalJobs(ctx, local, jobs.Config{StateDir: mk("j-sqlite")})
	if err != nil {
		return err
	}
	defer sqliteReal.Close(ctx)
	pgReal, err := executor.OpenLocalJobs(ctx, local, jobs.Config{StateDir: mk("j-pg"), DB: db})
	if err != nil {
		return err
	}
	defer pgReal.Close(ctx)
	req := engine.Request{Code: "print(1)"}
	for range 20 { // warm interpreters up
		local.Run(ctx, req, nil)
	}
	syncOp := func(m *jobs.Manager) func() error {
		return func() error {
			_, err := m.RunSync(ctx, req, jobs.SyncOptions{Budget: 20 * time.Second, Ephemeral: true})
			return err
		}
	}
	asyncOp := func(m *jobs.Manager) func() error {
		return func() error {
			j, err := m.Start(ctx, req, "")
			if err != nil {
				return err
			}
			// Follow it as a client does: long-poll the output to the end.
			var c jobs.Cursor
			for {
				c.Wait = time.Minute
				ch, err := m.Output(ctx, j.ID, c)
				if err != nil {
					return err
				}
				if ch.Done {
					return nil
				}
				c.StdoutOffset, c.StderrOffset = ch.StdoutOffset, ch.StderrOffset
			}
		}
	}
	realOp := func(x *executor.LocalJobs) func() error {
		return func() error {
			_, err := x.RunOrHandoff(ctx, req, executor.SyncOptions{Budget: 20 * time.Second}, nil)
			return err
		}
	}
	if want["store"] {
		fmt.Println("store: a job's store overhead (median per op)")
		for _, row := range []struct {
			name       string
			sqlite, pg func() error
		}{
			{"sync job, no-op runner (store only)", syncOp(sqliteNoop), syncOp(pgNoop)},
			{"background job, no-op runner (store only)", asyncOp(sqliteNoop), asyncOp(pgNoop)},
			{"sync job, warm print(1) (run_python)", realOp(sqliteReal), realOp(pgReal)},
		} {
			a, b, err := pair(n, rounds, row.sqlite, row.pg)
			if err != nil {
				return fmt.Errorf("%s: %w", row.name, err)
			}
			fmt.Printf("  %-44s sqlite %7.3f ms   postgres %7.3f ms   overhead %+7.3f ms (target <= 2 ms)\n", row.name, ms(a), ms(b), ms(b-a))
		}
		if ws := eng.WarmStatsIfOn(); ws != nil {
			fmt.Printf("  (runs so far: %d warm, %d cold %v)\n", ws.Warm, ws.Cold, ws.ColdReasons)
		}
	}

	// --- PostgreSQL round trips per job, by statement
	if want["trips"] {
		if err := tripsPerJob(trips, n, []tripRow{
			{"sync job (run_python), handed off never", syncOp(pgNoop)},
			{"background job, followed to the end", asyncOp(pgNoop)},
		}); err != nil {
			return err
		}
	}

	// --- PostgreSQL writes and notifications per job
	if want["writes"] {
		if err := writesPerJob(ctx, db, dbURL, n, syncOp(pgNoop), asyncOp(pgNoop)); err != nil {
			return err
		}
	}
	if !want["balancer"] && !want["crossnode"] {
		return nil
	}

	// --- a replica set: three servers on PostgreSQL, one engine each
	rs, err := startReplicas(ctx, dbURL, ws, mk, 3)
	if err != nil {
		return err
	}
	defer rs.close()
	for _, u := range rs.urls { // warm each replica's interpreters and info
		for range 10 {
			post(u, "print(1)")
		}
	}
	if want["balancer"] {
		proxy := goBalancer(rs.urls)
		defer proxy.Close()
		nginxURL, stopNginx := nginx(rs.urls)
		defer stopNginx()
		var direct atomic.Uint64
		cells := []struct {
			name string
			op   func() error
		}{
			{"direct to a replica", func() error { return post(rs.urls[direct.Add(1)%3], "print(1)") }},
			{"through a Go round-robin proxy", func() error { return post(proxy.URL, "print(1)") }},
		}
		if nginxURL != "" {
			cells = append(cells, struct {
				name string
				op   func() error
			}{"through nginx (deploy/compose/nginx.conf)", func() error { return post(nginxURL, "print(1)") }})
		}
		ops := make([]func() error, len(cells))
		for i := range cells {
			ops[i] = cells[i].op
		}
		meds, err := interleave(n, rounds, ops...)
		if err != nil {
			return fmt.Errorf("balancer: %w", err)
		}
		fmt.Println("\nbalancer: POST /v1/run print(1), one client (median)")
		for i, c := range cells {
			extra := ""
			if i > 0 {
				extra = fmt.Sprintf("   adds %+7.3f ms (target <= 1 ms)", ms(meds[i]-meds[0]))
			}
			fmt.Printf("  %-44s %7.3f ms%s\n", c.name, ms(meds[i]), extra)
		}
		if nginxURL == "" {
			fmt.Println("  (nginx not installed: apt-get install nginx-light to measure it)")
		}

	}

	// --- cross-node output latency
	if !want["crossnode"] {
		return nil
	}
	fmt.Printf("\ncrossnode: a line printed -> a waiting reader gets it (%d lines, 100 ms apart)\n", lines)
	for _, where := range []string{"other", "owner"} {
		lat, err := crossNode(rs, lines, where)
		if err != nil {
			return fmt.Errorf("crossnode: %w", err)
		}
		slices.Sort(lat)
		target := ""
		if where == "other" {
			target = " (target <= 50 ms)"
		}
		fmt.Printf("  reader on the %-5s replica: median %6.1f ms  p90 %6.1f ms  max %6.1f ms%s\n", where,
			ms(lat[len(lat)/2]), ms(lat[len(lat)*9/10]), ms(lat[len(lat)-1]), target)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pgVersion(db *pgdb.DB) string {
	var v string
	db.SQL.QueryRow(`SHOW server_version`).Scan(&v)
	return v
}

func newDatabase(server string) (string, func(), error) {
	admin, err := sql.Open("pgx", server)
	if err != nil {
		return "", nil, err
	}
	var b [6]byte
	rand.Read(b[:])
	name := "pyexec_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create the bench database: %w", err)
	}
	u, _ := url.Parse(server)
	u.Path = "/" + name
	return u.String(), func() {
		admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
		admin.Close()
	}, nil
}

// pair measures two ops alternately and returns each one's median.
func pair(n, rounds int, a, b func() error) (time.Duration, time.Duration, error) {
	m, err := interleave(n, rounds, a, b)
	if err != nil {
		return 0, 0, err
	}
	return m[0], m[1], nil
}

// interleave runs the ops in turn n times per round and returns, per op,
// the lowest of its rounds' medians (noise on a shared machine only adds).
func interleave(n, rounds int, ops ...func() error) ([]time.Duration, error) {
	best := make([]time.Duration, len(ops))
	for r := range rounds {
		samples := make([][]time.Duration, len(ops))
		deadline := time.Now().Add(2 * time.Minute)
		for i := 0; i < n && time.Now().Before(deadline); i++ {
			for k, op := range ops {
				start := time.Now()
				if err := op(); err != nil {
					return nil, err
				}
				samples[k] = append(samples[k], time.Since(start))
			}
		}
		for k := range ops {
			slices.Sort(samples[k])
			med := samples[k][len(samples[k])/2]
			if r == 0 || med < best[k] {
				best[k] = med
			}
		}
	}
	return best, nil
}

// writesPerJob counts committed transactions (pg_stat_database) and
// notifications (a listener on every channel) per job.
func writesPerJob(ctx context.Context, db *pgdb.DB, dbURL string, n int, syncJob, asyncJob func() error) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, ch := range []string{"pyexec_queue", "pyexec_job_changes"} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return err
		}
	}
	var notes atomic.Int64
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := conn.WaitForNotification(lctx); err != nil {
				return
			}
			notes.Add(1)
		}
	}()
	// Backends report their statistics at most once a second: wait that
	// long, then read on a fresh snapshot.
	stats, err := db.SQL.Conn(ctx)
	if err != nil {
		stop()
		return err
	}
	defer stats.Close()
	commits := func() int64 {
		time.Sleep(1500 * time.Millisecond)
		var c int64
		stats.QueryRowContext(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&c)
		return c
	}
	fmt.Println("\nwrites: PostgreSQL per job (transactions include the reads' own)")
	for _, row := range []struct {
		name string
		op   func() error
	}{{"sync job (run_python)", syncJob}, {"background job", asyncJob}} {
		c0, n0 := commits(), notes.Load()
		start := time.Now()
		for range n {
			if err := row.op(); err != nil {
				stop()
				return err
			}
		}
		el := time.Since(start)
		c1, n1 := commits(), notes.Load()
		fmt.Printf("  %-44s %5.1f transactions  %4.1f notifications  (%.0f jobs/s on one node, sequential)\n",
			row.name, float64(c1-c0-1)/float64(n), float64(n1-n0)/float64(n), float64(n)/el.Seconds())
	}
	stop()
	conn.Close(ctx)
	<-done
	return nil
}

type replicas struct {
	urls    []string
	closers []func()
	db      *sql.DB
}

func (r *replicas) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

func startReplicas(ctx context.Context, dbURL, ws string, mk func(string) string, n int) (*replicas, error) {
	rs := &replicas{}
	sdb, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, err
	}
	rs.db = sdb
	rs.closers = append(rs.closers, func() { sdb.Close() })
	for i := range n {
		db, err := pgdb.Open(ctx, dbURL, pgdb.Options{})
		if err != nil {
			return nil, err
		}
		rs.closers = append(rs.closers, func() { db.Close() })
		eng, err := engine.New(engine.Config{Workspace: ws, StateDir: mk(fmt.Sprintf("state%d", i)), Warm: engine.WarmConfig{Spares: 2}})
		if err != nil {
			return nil, err
		}
		rs.closers = append(rs.closers, func() { eng.Close() })
		jx, err := executor.OpenLocalJobs(ctx, executor.NewLocal(eng, "bench", 0), jobs.Config{StateDir: mk(fmt.Sprintf("jobs%d", i)), DB: db})
		if err != nil {
			return nil, err
		}
		rs.closers = append(rs.closers, func() { jx.Close(context.Background()) })
		ts := httptest.NewUnstartedServer(nil)
		m, err := cluster.Join(ctx, cluster.Config{DB: db, NodeID: jx.Manager().NodeID(), Addr: "http://" + ts.Listener.Addr().String()})
		if err != nil {
			return nil, err
		}
		rs.closers = append(rs.closers, func() { m.Leave(context.Background()) })
		srv, err := httpapi.NewServer(httpapi.Options{Executor: jx, Version: "bench", Router: cluster.NewRouter(m, nil), Workspace: ws, NoAuth: true})
		if err != nil {
			return nil, err
		}
		ts.Config.Handler = srv.Handler()
		ts.Start()
		rs.closers = append(rs.closers, ts.Close)
		rs.urls = append(rs.urls, ts.URL)
	}
	return rs, nil
}

var client = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}

func post(base, code string) error {
	body, _ := json.Marshal(map[string]any{"code": code})
	resp, err := client.Post(base+"/v1/run", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res engine.Result
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || res.ExitCode != 0 {
		return fmt.Errorf("run via %s: %d %+v %v", base, resp.StatusCode, res, err)
	}
	return nil
}

func goBalancer(urls []string) *httptest.Server {
	var targets []*url.URL
	for _, u := range urls {
		t, _ := url.Parse(u)
		targets = append(targets, t)
	}
	var next atomic.Uint64
	return httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets[next.Add(1)%uint64(len(targets))])
			pr.Out.Host = pr.Out.URL.Host
		},
		Transport:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64},
		FlushInterval: -1,
	})
}

// nginx starts nginx with the compose file's config pointed at urls, or
// returns "" when it is not installed.
func nginx(urls []string) (string, func()) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return "", func() {}
	}
	conf, err := os.ReadFile("deploy/compose/nginx.conf")
	if err != nil {
		return "", func() {}
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	text := string(conf)
	for i, u := range urls {
		text = strings.Replace(text, fmt.Sprintf("server pyexec-%d:8080", i+1), "server "+strings.TrimPrefix(u, "http://"), 1)
	}
	text = strings.Replace(text, "listen 8080;", "listen "+addr+";\n        access_log off;", 1)
	dir, _ := os.MkdirTemp("", "clusterbench-nginx-")
	path := filepath.Join(dir, "nginx.conf")
	os.WriteFile(path, []byte(text), 0o644)
	cmd := exec.Command(bin, "-c", path, "-e", filepath.Join(dir, "error.log"),
		"-g", fmt.Sprintf("daemon off; pid %s; error_log %s;", filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log")))
	if err := cmd.Start(); err != nil {
		return "", func() { os.RemoveAll(dir) }
	}
	stop := func() { cmd.Process.Signal(os.Interrupt); cmd.Wait(); os.RemoveAll(dir) }
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			return "http://" + addr, stop
		}
	}
	stop()
	return "", func() {}
}

// crossNode starts a job printing time stamps and reads them from another
// replica than its owner (or from the owner), returning print-to-read
// latencies.
func crossNode(rs *replicas, lines int, where string) ([]time.Duration, error) {
	code := fmt.Sprintf("import time\nfor i in range(%d):\n    time.sleep(0.1)\n    print(time.time_ns(), flush=True)\n", lines)
	body, _ := json.Marshal(map[string]any{"code": code, "timeout": 120})
	resp, err := client.Post(rs.urls[0]+"/v1/jobs", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	var j jobs.Job
	json.NewDecoder(resp.Body).Decode(&j)
	resp.Body.Close()
	// Which replica runs it?
	var owner string
	for start := time.Now(); owner == "" && time.Since(start) < 30*time.Second; time.Sleep(5 * time.Millisecond) {
		rs.db.QueryRow(`SELECT owner FROM pyexec_jobs WHERE id=$1 AND status='running'`, j.ID).Scan(&owner)
	}
	reader := ""
	for _, u := range rs.urls {
		r, err := client.Get(u + "/health")
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		mine := r.Header.Get(httpapi.NodeHeader) == owner
		if (where == "owner") == mine {
			reader = u
			break
		}
	}
	var lat []time.Duration
	var off int64
	pending := ""
	for start := time.Now(); time.Since(start) < 2*time.Minute; {
		r, err := client.Get(fmt.Sprintf("%s/v1/jobs/%s/output?stdout_offset=%d&wait=5", reader, j.ID, off))
		if err != nil {
			return nil, err
		}
		var ch jobs.Chunk
		err = json.NewDecoder(r.Body).Decode(&ch)
		r.Body.Close()
		now := time.Now()
		if err != nil {
			return nil, err
		}
		off = ch.StdoutOffset
		pending += ch.Stdout
		for {
			line, rest, ok := strings.Cut(pending, "\n")
			if !ok {
				break
			}
			pending = rest
			ns, err := strconv.ParseInt(line, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("job %s printed %q, not a time stamp", j.ID, line)
			}
			lat = append(lat, now.Sub(time.Unix(0, ns)))
		}
		if ch.Done {
			break
		}
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("no lines read")
	}
	return lat, nil
}

// tripCounter counts the statements pyexec sends (each one round trip),
// by a short name of the statement.
type tripCounter struct {
	mu sync.Mutex
	by map[string]int
}

func (t *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[string]int{}
	}
	t.by[statementName(d.SQL)]++
	return ctx
}

func (t *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (t *tripCounter) take() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	by := t.by
	t.by = nil
	return by
}

var _ pgx.QueryTracer = (*tripCounter)(nil)

// statementName is the first words of a statement that tell it apart: the
// verb and the table, past a WITH.
func statementName(q string) string {
	f := strings.Fields(q)
	if len(f) > 0 && strings.EqualFold(f[0], "WITH") {
		// WITH u AS (UPDATE pyexec_jobs ... ), i AS (INSERT ...)
		for i := 1; i+1 < len(f); i++ {
			if strings.HasPrefix(f[i], "(") {
				f = append([]string{"WITH"}, f[i:]...)
				f[1] = strings.TrimPrefix(f[1], "(")
				break
			}
		}
	}
	if len(f) > 4 {
		f = f[:4]
	}
	return strings.Join(f, " ")
}

type tripRow struct {
	name string
	op   func() error
}

// tripsPerJob runs each op n times and prints the statements it sent per
// job. The background loops (claims, lease renewals) run meanwhile and are
// counted too: they are part of what a job costs.
func tripsPerJob(t *tripCounter, n int, rows []tripRow) error {
	fmt.Println("\ntrips: PostgreSQL statements (round trips) per job, by statement")
	for _, row := range rows {
		t.take()
		start := time.Now()
		for range n {
			if err := row.op(); err != nil {
				return err
			}
		}
		el := time.Since(start)
		by := t.take()
		total := 0
		names := make([]string, 0, len(by))
		for k, v := range by {
			names = append(names, k)
			total += v
		}
		sort.Slice(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
		fmt.Printf("  %-44s %5.2f round trips per job (%.0f jobs/s, sequential)\n", row.name, float64(total)/float64(n), float64(n)/el.Seconds())
		for _, k := range names {
			fmt.Printf("      %5.2f  %s\n", float64(by[k])/float64(n), k)
		}
	}
	return nil
}

package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pyexec/pyexec/internal/testutil/mounts"
	"github.com/pyexec/pyexec/internal/testutil/proc"

	"github.com/pyexec/pyexec/internal/testutil/gate"
	"github.com/pyexec/pyexec/internal/testutil/pgtest"
)

// The replica-set scenarios, end to end: three real `pyexec serve`
// processes on one real PostgreSQL, behind a round-robin balancer, all on
// loopback. nodeLost is the silence bound the replicas run with.
const nodeLost = 3 * time.Second

type replicaNode struct {
	cmd    *exec.Cmd
	listen string // 127.0.0.1:PORT, kept across restarts
	url    string
	state  string
	id     string // node id (X-Pyexec-Node), new at every start
	exited chan struct{}
}

type replicaSet struct {
	t     *testing.T
	store string
	dir   string // the workspace, the same for every replica as on one host
	nodes []*replicaNode
	lb    *balancer
	db    *sql.DB
}

func startReplicaSet(t *testing.T, n int) *replicaSet {
	t.Helper()
	store := pgtest.NewDatabase(t)
	db, err := sql.Open("pgx", store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	dir := t.TempDir()
	if p, err := filepath.EvalSymlinks(dir); err == nil {
		dir = p
	}
	os.Chmod(dir, 0o777)
	rs := &replicaSet{t: t, store: store, dir: dir, db: db}
	for i := range n {
		rs.nodes = append(rs.nodes, &replicaNode{listen: "127.0.0.1:0", state: t.TempDir()})
		rs.start(i)
	}
	rs.lb = newBalancer(t, rs)
	return rs
}

// start (re)starts replica i on its port.
func (rs *replicaSet) start(i int) {
	t := rs.t
	t.Helper()
	nd := rs.nodes[i]
	cmd := asCLI("serve", "--listen", nd.listen, "--state-dir", nd.state, "--max-concurrent", "1",
		"--node-lost-after", strconv.FormatFloat(nodeLost.Seconds(), 'f', -1, 64), "--sync-budget", "5")
	cmd.Dir = rs.dir
	cmd.Env = append(cmd.Env, "PYEXEC_TOKEN="+testToken, "PYEXEC_STORE="+rs.store)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	nd.cmd, nd.exited = cmd, make(chan struct{})
	t.Cleanup(func() { cmd.Process.Kill(); <-nd.exited; mounts.WaitGone(t, nd.state) })
	sc := bufio.NewScanner(stderr)
	var lines []string
	for nd.url == "" || !strings.Contains(strings.Join(lines, "\n"), "[READY]") {
		if !sc.Scan() {
			t.Fatalf("replica %d exited before [READY]: %q", i, lines)
		}
		lines = append(lines, sc.Text())
		if m := regexp.MustCompile(`^\[READY\] .* on (http://[0-9.:]+) `).FindStringSubmatch(sc.Text()); m != nil {
			nd.url = m[1]
			nd.listen = strings.TrimPrefix(nd.url, "http://")
		}
	}
	var logMu sync.Mutex
	var tail []string
	t.Cleanup(func() {
		if t.Failed() { // the replica's last words explain most failures
			logMu.Lock()
			t.Logf("replica %d (%s) log tail:\n%s", i, nd.id, strings.Join(tail, "\n"))
			logMu.Unlock()
		}
	})
	go func() {
		for sc.Scan() {
			logMu.Lock()
			if tail = append(tail, sc.Text()); len(tail) > 60 {
				tail = tail[1:]
			}
			logMu.Unlock()
		}
		cmd.Wait()
		close(nd.exited)
	}()
	resp, err := http.Get(nd.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	nd.id = resp.Header.Get("X-Pyexec-Node")
	if nd.id == "" {
		t.Fatal("no X-Pyexec-Node header on a replica")
	}
}

func (rs *replicaSet) kill9(i int) {
	nd := rs.nodes[i]
	nd.cmd.Process.Signal(syscall.SIGKILL)
	<-nd.exited
	rs.lb.tr.CloseIdleConnections() // as a balancer's health check would drop it
}

func (rs *replicaSet) stop(i int) {
	nd := rs.nodes[i]
	nd.cmd.Process.Signal(syscall.SIGTERM)
	<-nd.exited
	rs.lb.tr.CloseIdleConnections()
}

// byID returns the index of the replica whose node id is id (-1: none).
func (rs *replicaSet) byID(id string) int {
	for i, nd := range rs.nodes {
		if nd.id == id {
			return i
		}
	}
	return -1
}

// owner waits until a job has been claimed and returns the replica running it.
func (rs *replicaSet) owner(id string) int {
	rs.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var owner, status string
		if err := rs.db.QueryRow(`SELECT owner, status FROM pyexec_jobs WHERE id=$1`, id).Scan(&owner, &status); err != nil {
			rs.t.Fatal(err)
		}
		if owner != "" && status == "running" {
			return rs.byID(owner)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rs.t.Fatalf("job %s never started running", id)
	return -1
}

// balancer is a round-robin reverse proxy over the replicas' current
// addresses, skipping replicas it cannot connect to (as nginx does with
// proxy_next_upstream error). Responses stream (SSE) unbuffered.
type balancer struct {
	*httptest.Server
	tr    *http.Transport
	next  atomic.Uint64
	rs    *replicaSet
	count sync.Map // node id -> *atomic.Int64 answered
}

func newBalancer(t *testing.T, rs *replicaSet) *balancer {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	b := &balancer{rs: rs, tr: tr}
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body.Close()
		}
		var lastErr error
		for range len(rs.nodes) {
			nd := rs.nodes[b.next.Add(1)%uint64(len(rs.nodes))]
			out := r.Clone(r.Context())
			if r.Body != nil {
				out.Body = io.NopCloser(strings.NewReader(string(body)))
			}
			out.URL.Host, out.Host = nd.listen, nd.listen
			resp, err := tr.RoundTrip(out)
			var op *net.OpError
			if err != nil && errors.As(err, &op) && op.Op == "dial" {
				lastErr = err
				continue // a replica that is down: try the next one
			}
			if err == nil {
				c, _ := b.count.LoadOrStore(resp.Header.Get("X-Pyexec-Node"), new(atomic.Int64))
				c.(*atomic.Int64).Add(1)
			}
			return resp, err
		}
		return nil, lastErr
	})
	p := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.Out.URL.Scheme = "http"; pr.Out.Host = "" },
		Transport:     rt,
		FlushInterval: -1,
	}
	b.Server = httptest.NewServer(p)
	t.Cleanup(b.Close)
	return b
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func call(t *testing.T, method, url string, body any, v any) int {
	t.Helper()
	st, _ := sessionCall(t, context.Background(), method, url, body, v)
	return st
}

type jobView struct {
	ID     string `json:"job_id"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

type chunkView struct {
	Status       string `json:"status"`
	Stdout       string `json:"stdout"`
	StdoutOffset int64  `json:"next_stdout_offset"`
	StderrOffset int64  `json:"next_stderr_offset"`
	Done         bool   `json:"done"`
}

func (rs *replicaSet) startJob(t *testing.T, base, code string) string {
	t.Helper()
	var j jobView
	if st := call(t, "POST", base+"/v1/jobs", map[string]any{"code": code, "timeout": 120}, &j); st != 202 {
		t.Fatalf("start job: %d %+v", st, j)
	}
	return j.ID
}

func (rs *replicaSet) waitFinal(t *testing.T, base, id string) jobView {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var ch chunkView
		call(t, "GET", fmt.Sprintf("%s/v1/jobs/%s/output?wait=5&stdout_offset=0&max_bytes=1", base, id), nil, &ch)
		var j jobView
		call(t, "GET", base+"/v1/jobs/"+id, nil, &j)
		if j.Status == "completed" || j.Status == "failed" || j.Status == "cancelled" {
			return j
		}
	}
	t.Fatalf("job %s did not finish", id)
	return jobView{}
}

// follower reads one job's output with one continuous cursor, each read
// from the next of the given replicas in turn, and checks that offsets
// never go backwards.
type follower struct {
	out     strings.Builder
	off     int64
	reads   int
	regress error
}

func (f *follower) follow(t *testing.T, bases []string, id string, until func(chunkView) bool) chunkView {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		base := bases[f.reads%len(bases)]
		f.reads++
		var ch chunkView
		if st := call(t, "GET", fmt.Sprintf("%s/v1/jobs/%s/output?stdout_offset=%d&wait=2", base, id, f.off), nil, &ch); st != 200 {
			t.Fatalf("output from %s: %d", base, st)
		}
		if ch.StdoutOffset < f.off {
			f.regress = fmt.Errorf("offset went back from %d to %d on %s", f.off, ch.StdoutOffset, base)
			t.Fatal(f.regress)
		}
		f.out.WriteString(ch.Stdout)
		f.off = ch.StdoutOffset
		if ch.Done || until(ch) {
			return ch
		}
	}
	t.Fatalf("job %s: output never reached the end", id)
	return chunkView{}
}

// counting checks that text is "pid N\n" then 0, 1, 2, ... one per line
// (a job that ran twice, or lost or repeated bytes, breaks the sequence),
// and returns the pid and how many numbers there were.
func counting(t *testing.T, text string) (pid, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if _, err := fmt.Sscanf(lines[0], "pid %d", &pid); err != nil {
		t.Fatalf("first line %q", lines[0])
	}
	for i, l := range lines[1:] {
		if l != strconv.Itoa(i) {
			t.Fatalf("line %d is %q, want %d (output: %q)", i+1, l, i, text)
		}
	}
	return pid, len(lines) - 1
}

const countingJob = "import os, time\nprint('pid', os.getpid(), flush=True)\nfor i in range(%d):\n    print(i, flush=True)\n    time.sleep(%g)\n"

func TestReplicaSet(t *testing.T) {
	rs := startReplicaSet(t, 3)
	lb := rs.lb.URL
	urls := func() []string {
		var out []string
		for _, nd := range rs.nodes {
			out = append(out, nd.url)
		}
		return out
	}

	t.Run("1000 sync runs through the balancer", func(t *testing.T) {
		const runs, workers = 1000, 8
		var wg sync.WaitGroup
		var bad atomic.Int64
		var firstBad atomic.Value
		next := atomic.Int64{}
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1)
					if i > runs {
						return
					}
					var res struct {
						Stdout   string `json:"stdout"`
						ExitCode int    `json:"exit_code"`
					}
					body, _ := json.Marshal(map[string]any{"code": fmt.Sprintf("print(%d * %d)", i, i)})
					resp, err := http.DefaultClient.Do(authed("POST", lb+"/v1/run", string(body)))
					if err == nil {
						err = json.NewDecoder(resp.Body).Decode(&res)
						resp.Body.Close()
					}
					if err != nil || res.ExitCode != 0 || res.Stdout != fmt.Sprintf("%d\n", i*i) {
						bad.Add(1)
						firstBad.CompareAndSwap(nil, fmt.Sprintf("run %d: %+v %v", i, res, err))
					}
				}
			}()
		}
		wg.Wait()
		if bad.Load() > 0 {
			t.Fatalf("%d of %d runs wrong; first: %v", bad.Load(), runs, firstBad.Load())
		}
		for _, nd := range rs.nodes {
			c, ok := rs.lb.count.Load(nd.id)
			if !ok || c.(*atomic.Int64).Load() < runs/10 {
				t.Errorf("replica %s answered %v runs: the balancer should spread them", nd.id, c)
			}
		}
	})

	t.Run("pending jobs spread to the free nodes", func(t *testing.T) {
		g := gate.Path(t)
		code := fmt.Sprintf("import os, time\nwhile not os.path.exists(%q):\n    time.sleep(0.02)\nprint('done')", g)
		var ids []string
		for range 3 { // all on one replica: it runs one, the others claim the rest
			ids = append(ids, rs.startJob(t, rs.nodes[0].url, code))
		}
		owners := map[int]bool{}
		for _, id := range ids {
			owners[rs.owner(id)] = true
		}
		if len(owners) != 3 {
			t.Fatalf("3 jobs ran on replicas %v, want one on each (--max-concurrent 1)", owners)
		}
		fourth := rs.startJob(t, lb, code)
		var j jobView
		call(t, "GET", lb+"/v1/jobs/"+fourth, nil, &j)
		if j.Status != "pending" {
			t.Fatalf("a 4th job with every replica full is %s, want pending", j.Status)
		}
		os.WriteFile(g, nil, 0o644)
		for _, id := range append(ids, fourth) {
			if j := rs.waitFinal(t, lb, id); j.Status != "completed" {
				t.Fatalf("job %s: %+v", id, j)
			}
		}
	})

	t.Run("job read from the two other nodes with one cursor", func(t *testing.T) {
		id := rs.startJob(t, rs.nodes[1].url, fmt.Sprintf(countingJob, 40, 0.02))
		o := rs.owner(id)
		var others []string
		for i, u := range urls() {
			if i != o {
				others = append(others, u)
			}
		}
		var f follower
		ch := f.follow(t, others, id, func(chunkView) bool { return false })
		if ch.Status != "completed" {
			t.Fatalf("final chunk %+v", ch)
		}
		if _, n := counting(t, f.out.String()); n != 40 {
			t.Fatalf("read %d lines across the nodes, want 40", n)
		}
	})

	t.Run("cancel from a non-owner kills the tree", func(t *testing.T) {
		// A confined job has its own PID namespace: the pids it could print
		// mean nothing here, so its child carries a mark the test finds.
		mark := proc.Mark(t)
		code := proc.Sleeper(mark) + "import time\nprint('started', flush=True)\ntime.sleep(300)\n"
		id := rs.startJob(t, lb, code)
		o := rs.owner(id)
		other := rs.nodes[(o+1)%3].url
		var f follower // print() writes its pieces one by one (-u): wait for the whole line
		f.follow(t, []string{other}, id, func(chunkView) bool { return strings.Contains(f.out.String(), "\n") })
		if n := len(proc.Marked(mark)); n != 1 {
			t.Fatalf("the job's child is not running (%d marked processes)", n)
		}
		var j jobView
		if st := call(t, "POST", other+"/v1/jobs/"+id+"/cancel", nil, &j); st != 200 || j.Status != "cancelled" {
			t.Fatalf("cancel from replica %d (owner %d): %d %+v", (o+1)%3, o, st, j)
		}
		proc.WaitGone(t, mark, 15*time.Second)
	})

	t.Run("MCP session and stateless clients through the balancer", func(t *testing.T) {
		hc := &http.Client{Transport: bearerRT{testToken}}
		run := func(cs *mcp.ClientSession, i int) error {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": fmt.Sprintf("print(%d + 1)", i)}})
			if err != nil {
				return err
			}
			out, _ := json.Marshal(res.StructuredContent)
			if res.IsError || !strings.Contains(string(out), fmt.Sprintf(`"stdout":"%d\n"`, i+1)) {
				return fmt.Errorf("run_python %d: %s", i, out)
			}
			return nil
		}
		connect := func(version string) *mcp.ClientSession {
			var opts *mcp.ClientSessionOptions
			if version != "" {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "lb", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: lb + "/mcp", HTTPClient: hc, MaxRetries: -1}, opts)
			if err != nil {
				t.Fatal(err)
			}
			return cs
		}
		stateless := connect("")
		defer stateless.Close()
		session := connect("2025-11-25")
		defer session.Close()
		if stateless.ID() != "" || session.ID() == "" {
			t.Fatalf("session ids %q / %q", stateless.ID(), session.ID())
		}
		for i := range 6 { // round robin: most session calls land on another replica and are forwarded
			if err := run(stateless, i); err != nil {
				t.Fatal("stateless:", err)
			}
			if err := run(session, i); err != nil {
				t.Fatal("session:", err)
			}
		}
		ownerNode, _, _ := strings.Cut(session.ID(), ".")
		o := rs.byID(ownerNode)
		if o < 0 {
			t.Fatalf("session id %q names no replica", session.ID())
		}
		rs.stop(o) // its replica goes away: the session is gone, a new one works
		err := run(session, 99)
		if err == nil {
			t.Fatal("a session whose replica is gone still answered")
		}
		fresh := connect("2025-11-25")
		defer fresh.Close()
		if err := run(fresh, 7); err != nil {
			t.Fatal("new session after its replica left:", err)
		}
		if err := run(stateless, 8); err != nil {
			t.Fatal("stateless after a replica left:", err)
		}
		rs.start(o)
	})

	t.Run("pyexec mcp --executor at the balancer", func(t *testing.T) {
		cmd := asCLI("mcp", "--executor", lb)
		cmd.Env = append(cmd.Env, "PYEXEC_TOKEN="+testToken)
		cmd.Dir = t.TempDir()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": fmt.Sprintf(countingJob, 10, 0.01), "mode": "async"}})
		if err != nil || res.IsError {
			t.Fatalf("async run_python: %v %v", err, res)
		}
		var started struct {
			JobID string `json:"job_id"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &started)
		var text string
		off := 0
		for range 60 { // each get_job may land on another replica
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_job", Arguments: map[string]any{"job_id": started.JobID, "stdout_offset": off, "wait": 5}})
			if err != nil || res.IsError {
				t.Fatalf("get_job: %v %v", err, res)
			}
			var got struct {
				Status string `json:"status"`
				Stdout string `json:"stdout"`
				Next   int    `json:"next_stdout_offset"`
				Done   bool   `json:"done"`
			}
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, &got)
			if got.Next < off {
				t.Fatalf("offset went back from %d to %d", off, got.Next)
			}
			text, off = text+got.Stdout, got.Next
			if got.Done {
				break
			}
		}
		if _, n := counting(t, text); n != 10 {
			t.Fatalf("job output through pyexec mcp: %q", text)
		}
	})

	t.Run("kill -9 of the owner: node_lost within the bound, offsets never regress, claimed once", func(t *testing.T) {
		mark := proc.Mark(t)
		id := rs.startJob(t, lb, proc.Sleeper(mark)+fmt.Sprintf(countingJob, 100000, 0.05))
		o := rs.owner(id)
		var others []string
		for i, u := range urls() {
			if i != o {
				others = append(others, u)
			}
		}
		var f follower
		f.follow(t, others, id, func(chunkView) bool { return strings.Count(f.out.String(), "\n") > 10 })
		killed := time.Now()
		rs.kill9(o)
		ch := f.follow(t, others, id, func(chunkView) bool { return false })
		lostAfter := time.Since(killed)
		var j jobView
		call(t, "GET", others[0]+"/v1/jobs/"+id, nil, &j)
		if j.Status != "failed" || !strings.HasPrefix(j.Error, "node_lost") || !ch.Done {
			t.Fatalf("after kill -9 of its replica the job is %+v (chunk %+v)", j, ch)
		}
		// The lease is renewed every bound/5 and checked as often.
		if limit := nodeLost + nodeLost/5 + 2*time.Second; lostAfter > limit {
			t.Fatalf("node_lost after %s, want within %s", lostAfter, limit)
		}
		t.Logf("node_lost %s after kill -9 (bound %s); %d bytes readable, %d reads", lostAfter.Round(time.Millisecond), nodeLost, f.off, f.reads)
		_, n := counting(t, f.out.String())
		if n < 10 {
			t.Fatalf("only %d lines survived", n)
		}
		var epoch int
		rs.db.QueryRow(`SELECT epoch FROM pyexec_jobs WHERE id=$1`, id).Scan(&epoch)
		if epoch != 1 {
			t.Fatalf("job claimed %d times, want once", epoch)
		}
		proc.WaitGone(t, mark, 15*time.Second)

		// The killed replica comes back as a new node: it rejoins, the old
		// node is dropped, and nothing of it is left running or unfinished.
		old := rs.nodes[o].id
		rs.start(o)
		deadline := time.Now().Add(2*nodeLost + 10*time.Second)
		for {
			var live, stale, unfinished int
			rs.db.QueryRow(`SELECT count(*) FILTER (WHERE id<>$1), count(*) FILTER (WHERE id=$1) FROM pyexec_nodes`, old).Scan(&live, &stale)
			rs.db.QueryRow(`SELECT count(*) FROM pyexec_jobs WHERE owner=$1 AND status IN ('pending','running')`, old).Scan(&unfinished)
			if live == 3 && stale == 0 && unfinished == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after restart: %d live nodes, old node row %d, its unfinished jobs %d", live, stale, unfinished)
			}
			time.Sleep(100 * time.Millisecond)
		}
		id2 := rs.startJob(t, rs.nodes[o].url, fmt.Sprintf(countingJob, 3, 0.01))
		if j := rs.waitFinal(t, lb, id2); j.Status != "completed" {
			t.Fatalf("a job after the restart: %+v", j)
		}
	})

	t.Run("PostgreSQL restart mid-run is survived", func(t *testing.T) {
		id := rs.startJob(t, lb, fmt.Sprintf(countingJob, 40, 0.1))
		o := rs.owner(id)
		var f follower
		reader := []string{rs.nodes[(o+1)%3].url}
		f.follow(t, reader, id, func(chunkView) bool { return strings.Count(f.out.String(), "\n") > 5 })
		pgtest.Restart(t, 500*time.Millisecond)
		ch := f.follow(t, reader, id, func(chunkView) bool { return false })
		var j jobView
		call(t, "GET", lb+"/v1/jobs/"+id, nil, &j)
		if j.Status != "completed" || ch.Status != "completed" {
			t.Fatalf("after a PostgreSQL restart the job is %+v", j)
		}
		if _, n := counting(t, f.out.String()); n != 40 {
			t.Fatalf("%d lines after the restart, want 40", n)
		}
		var res struct{ Stdout string }
		call(t, "POST", lb+"/v1/run", map[string]any{"code": "print('still here')"}, &res)
		if res.Stdout != "still here\n" {
			t.Fatalf("sync run after the restart: %+v", res)
		}
	})
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

var _ = url.Parse

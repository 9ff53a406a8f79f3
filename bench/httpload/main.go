// Command httpload measures pyexec's execution server: requests per second
// and p50/p99 latency of one tiny run (print(1)) at several concurrency
// levels, through each front end and executor:
//
//	python     bare `python -c` exec (the floor every mode pays)
//	local      executor.Local.Run in process (no HTTP)
//	remote     httpapi.Client.Run -> POST /v1/run (the remote executor)
//	rest       plain POST /v1/run with a JSON body (any HTTP client)
//	mcp        tools/call run_python over Streamable HTTP at /mcp, stateless
//	           2026-07-28 client
//	mcp-session the same with a session-based 2025-11-25 client
//	mcp-mem-local / mcp-mem-remote  an MCP client over in-memory transports
//	           with the local or the remote executor behind the tools: the
//	           remote executor's overhead as an MCP user sees it
//
// By default it starts its own server on a loopback port (same process, real
// listener); --url targets a running `pyexec serve` instead. Every loop is
// bounded by --requests and --max-time. Only loopback traffic.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/mcpserver"
)

func main() {
	launcher.MaybeRun() // the engine re-executes this binary as its launcher
	var (
		url      = flag.String("url", "", "base URL of a running pyexec serve (default: start one in process on loopback)")
		levels   = flag.String("c", "1,8,32", "concurrency levels")
		requests = flag.Int("requests", 0, "requests per cell (default 40 + 4 per client)")
		maxTime  = flag.Duration("max-time", 30*time.Second, "stop a cell after this long")
		modes    = flag.String("modes", "python,local,remote,rest,mcp,mcp-session,mcp-mem-local,mcp-mem-remote", "modes to measure")
		code     = flag.String("code", "print(1)", "the Python code each request runs")
		rounds   = flag.Int("rounds", 1, "measure every cell this many times, interleaved, and report the best round (shared, noisy machines)")
		warm     = flag.Int("warm", 2, "the in-process server's --warm (0: every run starts a fresh interpreter)")
		dir      = flag.String("dir", "", "where the workspace and state dirs are made (default: beside pyexec's default state dir)")
	)
	flag.Parse()
	// The token of a --url server comes from the environment, never the
	// command line (which every local user can read).
	token := strings.TrimSpace(os.Getenv("PYEXEC_TOKEN"))
	if err := run(*url, token, *levels, *requests, *maxTime, *modes, *code, max(1, *rounds), *warm, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "httpload:", err)
		os.Exit(1)
	}
}

type op func(ctx context.Context) error

// target builds, per concurrency level, one op per client.
type target struct {
	name  string
	setup func(clients int) ([]op, func(), error)
}

func run(url, token, levelsFlag string, requests int, maxTime time.Duration, modesFlag, code string, rounds, warm int, dir string) error {
	ctx := context.Background()
	if dir == "" {
		// Where a server keeps its state by default (see bench/pybench).
		dir = filepath.Dir(engine.DefaultStateDir())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	ws, err := os.MkdirTemp(dir, "httpload-ws-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	state, err := os.MkdirTemp(dir, "httpload-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	eng, err := engine.New(engine.Config{Workspace: ws, StateDir: state, Warm: engine.WarmConfig{Spares: warm}})
	if err != nil {
		return err
	}
	plain := executor.NewLocal(eng, "bench", 0)
	// As in `pyexec serve` and `pyexec mcp`: the executor has jobs, so sync
	// tool calls go through the job manager's smart-async path.
	jobsDir, err := os.MkdirTemp(dir, "httpload-jobs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(jobsDir)
	local, err := executor.OpenLocalJobs(ctx, plain, jobs.Config{StateDir: jobsDir, MaxConcurrent: 64, MaxQueue: 1000})
	if err != nil {
		return err
	}
	defer local.Close(context.Background())
	def, err := eng.DefaultInterpreter(ctx)
	if err != nil {
		return err
	}

	if url == "" {
		srv, err := httpapi.NewServer(httpapi.Options{Executor: local, Version: "bench", Token: token, NoAuth: token == "", MaxInFlight: -1, Workspace: ws})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		go srv.Serve(sctx, ln, time.Second)
		url = "http://" + ln.Addr().String()
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, Proxy: nil}}
	auth := func(r *http.Request) {
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
	}
	remote, err := httpapi.NewClient(url, httpapi.ClientOptions{Token: token})
	if err != nil {
		return err
	}
	req := engine.Request{Code: code}
	body, _ := json.Marshal(req)

	same := func(o op) func(int) ([]op, func(), error) {
		return func(n int) ([]op, func(), error) {
			ops := make([]op, n)
			for i := range ops {
				ops[i] = o
			}
			return ops, func() {}, nil
		}
	}
	mcpHTTP := func(version string) func(int) ([]op, func(), error) {
		return func(n int) ([]op, func(), error) {
			var sessions []*mcp.ClientSession
			closeAll := func() {
				for _, s := range sessions {
					s.Close()
				}
			}
			httpc := &http.Client{Transport: roundTripper{hc.Transport, auth}}
			var ops []op
			for range n {
				var opts *mcp.ClientSessionOptions
				if version != "" {
					opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
				}
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "httpload", Version: "1"}, nil).Connect(ctx,
					&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: httpc, DisableStandaloneSSE: true}, opts)
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				sessions = append(sessions, cs)
				ops = append(ops, callTool(cs, code))
			}
			return ops, closeAll, nil
		}
	}
	mcpMem := func(ex executor.Executor) func(int) ([]op, func(), error) {
		return func(n int) ([]op, func(), error) {
			srv := mcpserver.New(ex, mcpserver.Options{Version: "bench"})
			var closers []func()
			var ops []op
			for range n {
				st, ct := mcp.NewInMemoryTransports()
				ss, err := srv.Connect(ctx, st, nil)
				if err != nil {
					return nil, nil, err
				}
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "httpload", Version: "1"}, nil).Connect(ctx, ct, nil)
				if err != nil {
					return nil, nil, err
				}
				closers = append(closers, func() { cs.Close(); ss.Close() })
				ops = append(ops, callTool(cs, code))
			}
			return ops, func() {
				for _, c := range closers {
					c()
				}
			}, nil
		}
	}
	all := map[string]target{
		"python": {"python", same(func(ctx context.Context) error {
			return exec.CommandContext(ctx, def.Path, "-c", code).Run()
		})},
		"local": {"local", same(func(ctx context.Context) error {
			return check(local.Run(ctx, req, nil))
		})},
		"remote": {"remote", same(func(ctx context.Context) error {
			return check(remote.Run(ctx, req, nil))
		})},
		"rest": {"rest", same(func(ctx context.Context) error {
			r, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/run", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			auth(r)
			resp, err := hc.Do(r)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var res engine.Result
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				return fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
			}
			if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
				return err
			}
			return check(res, nil)
		})},
		"mcp":            {"mcp", mcpHTTP("")},
		"mcp-session":    {"mcp-session", mcpHTTP("2025-11-25")},
		"mcp-mem-local":  {"mcp-mem-local", mcpMem(local)},
		"mcp-mem-remote": {"mcp-mem-remote", mcpMem(remote)},
	}

	var levels []int
	for _, s := range strings.Split(levelsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("bad concurrency level %q", s)
		}
		levels = append(levels, n)
	}
	fmt.Printf("server %s, interpreter %s (Python %s), code %q\n", url, def.Path, def.Version, code)
	fmt.Printf("%-15s %5s %6s %8s %9s %9s %9s %6s\n", "mode", "conc", "reqs", "req/s", "p50 ms", "p99 ms", "mean ms", "errors")
	// Warm up once (interpreter probe, code file, connections).
	_ = check(local.Run(ctx, req, nil))
	_ = check(remote.Run(ctx, req, nil))
	var targets []target
	for _, m := range strings.Split(modesFlag, ",") {
		t, ok := all[strings.TrimSpace(m)]
		if !ok {
			return fmt.Errorf("unknown mode %q", m)
		}
		targets = append(targets, t)
	}
	best := map[string]result{}
	key := func(t target, c int) string { return fmt.Sprintf("%s/%d", t.name, c) }
	for round := range rounds {
		for _, t := range targets {
			for _, c := range levels {
				n := requests
				if n <= 0 {
					n = 40 + 4*c
				}
				ops, done, err := t.setup(c)
				if err != nil {
					return fmt.Errorf("%s: %w", t.name, err)
				}
				r := measure(ops, n, maxTime)
				done()
				if b, ok := best[key(t, c)]; !ok || r.rps > b.rps {
					best[key(t, c)] = r
				}
				if round == rounds-1 {
					r := best[key(t, c)]
					note := ""
					if r.cut > 0 {
						note = fmt.Sprintf("  (%d cut by --max-time)", r.cut)
					}
					fmt.Printf("%-15s %5d %6d %8.1f %9.1f %9.1f %9.1f %6d%s\n", t.name, c, r.n, r.rps, ms(r.p50), ms(r.p99), ms(r.mean), r.errors, note)
					if r.firstErr != nil {
						fmt.Printf("    first error: %v\n", r.firstErr)
					}
				}
			}
		}
	}
	return nil
}

func check(res engine.Result, err error) error {
	if err != nil {
		return err
	}
	if !res.Success {
		return fmt.Errorf("run failed: exit %d: %s", res.ExitCode, res.Stderr)
	}
	return nil
}

func callTool(cs *mcp.ClientSession, code string) op {
	return func(ctx context.Context) error {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code}})
		if err != nil {
			return err
		}
		if r.IsError {
			return fmt.Errorf("tool error: %v", r.Content)
		}
		return nil
	}
}

type roundTripper struct {
	base http.RoundTripper
	auth func(*http.Request)
}

func (t roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	t.auth(r)
	return t.base.RoundTrip(r)
}

type result struct {
	n, errors, cut int
	rps            float64
	p50, p99, mean time.Duration
	firstErr       error
}

// measure runs n requests spread over len(ops) concurrent clients (each
// client issues its next request as soon as the previous one is answered),
// stopping early after maxTime.
func measure(ops []op, n int, maxTime time.Duration) result {
	ctx, cancel := context.WithTimeout(context.Background(), maxTime)
	defer cancel()
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		errs     int
		cut      int
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for _, o := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				t0 := time.Now()
				err := o(ctx)
				d := time.Since(t0)
				mu.Lock()
				if err != nil && ctx.Err() != nil {
					cut++ // stopped by --max-time, not a failure
				} else if err != nil {
					errs++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	r := result{n: len(lat), errors: errs, cut: cut, firstErr: firstErr}
	if len(lat) > 0 {
		r.rps = float64(len(lat)) / elapsed.Seconds()
		r.p50 = lat[len(lat)*50/100]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		r.mean = sum / time.Duration(len(lat))
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startNginx runs Debian's nginx with the compose file's nginx.conf, its
// upstreams pointed at the replicas, on a free loopback port, and returns
// its URL. Without nginx the test skips, unless PYEXEC_TEST_NGINX_REQUIRED
// is set (CI installs it).
func startNginx(t *testing.T, rs *replicaSet) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if os.Getenv("PYEXEC_TEST_NGINX_REQUIRED") != "" {
			t.Fatal("nginx is required here (apt-get install nginx-light)")
		}
		t.Skip("nginx is not installed (apt-get install nginx-light)")
	}
	conf, err := os.ReadFile("../../deploy/compose/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	text := string(conf)
	for i, nd := range rs.nodes {
		text = strings.Replace(text, fmt.Sprintf("server pyexec-%d:8080", i+1), "server "+nd.listen, 1)
	}
	text = regexp.MustCompile(`listen 8080;`).ReplaceAllString(text, "listen "+addr+";\n        access_log off;")
	dir := t.TempDir()
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", path, "-e", filepath.Join(dir, "error.log"),
		"-g", fmt.Sprintf("daemon off; pid %s; error_log %s;", filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log")))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// SIGTERM: the master stops its workers (a SIGKILLed master would leave them).
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	url := "http://" + addr
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("nginx did not come up")
		}
	}
	return url
}

// TestReplicaSetBehindNginx runs the traffic the compose file is for
// through nginx configured by that file: sync runs, a job's SSE stream and
// an MCP session whose calls nginx spreads over the replicas.
func TestReplicaSetBehindNginx(t *testing.T) {
	rs := startReplicaSet(t, 3)
	lb := startNginx(t, rs)
	nodes := map[string]bool{}
	for i := range 60 {
		var res struct{ Stdout string }
		resp, err := http.DefaultClient.Do(authed("POST", lb+"/v1/run", fmt.Sprintf(`{"code": "print(%d)"}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		nodes[resp.Header.Get("X-Pyexec-Node")] = true
		if res.Stdout != fmt.Sprintf("%d\n", i) {
			t.Fatalf("run %d through nginx: %+v", i, res)
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("nginx sent the runs to %d replicas, want 3", len(nodes))
	}

	// SSE through nginx, from whichever replica it picks, live.
	id := rs.startJob(t, lb, fmt.Sprintf(countingJob, 20, 0.05))
	req := authed("GET", lb+"/v1/jobs/"+id+"/output", "")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("SSE through nginx: %v %v", resp, err)
	}
	var out strings.Builder
	outputs := 0
	sc := bufio.NewScanner(resp.Body)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && event == "output" {
			var ch chunkView
			json.Unmarshal([]byte(v), &ch)
			out.WriteString(ch.Stdout)
			outputs++
		}
		if event == "end" {
			break
		}
	}
	resp.Body.Close()
	if _, n := counting(t, out.String()); n != 20 || outputs < 3 {
		t.Fatalf("SSE through nginx: %d lines in %d output events (want 20, streamed in several)", n, outputs)
	}

	// An MCP session: nginx round-robins its requests, replicas forward
	// them to the one that created the session.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "nginx", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: lb + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{testToken}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 6 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": fmt.Sprintf("print(%d)", i)}})
		if err != nil || res.IsError {
			t.Fatalf("session call %d through nginx: %v %v", i, err, res)
		}
	}
}

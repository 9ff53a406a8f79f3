package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/httpapi"
)

// startReal serves on a real loopback listener through Server.Serve (the
// code path of `pyexec serve`, graceful shutdown included).
func startReal(t *testing.T, grace time.Duration) (url string, stop context.CancelFunc, served <-chan error) {
	t.Helper()
	f := newFixture(t)
	ex := f.local(t, nil)
	srv, err := httpapi.NewServer(httpapi.Options{Executor: ex, Version: testVersion, Workspace: f.workspace, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln, grace) }()
	t.Cleanup(cancel)
	return "http://" + ln.Addr().String(), cancel, errc
}

// TestGracefulShutdownLetsRunsFinish: on shutdown the listener closes at
// once, a running sync call still completes with its result, and an open
// MCP session (with its standalone SSE stream) does not hold the server up.
func TestGracefulShutdownLetsRunsFinish(t *testing.T) {
	url, stop, served := startReal(t, 30*time.Second)

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	resp := postStream(t, context.Background(), url+"/v1/run", engine.Request{Code: "import time; time.sleep(1.5); print('finished')"})
	dec := json.NewDecoder(resp.Body)
	var first httpapi.StreamLine[engine.Result]
	if err := dec.Decode(&first); err != nil || first.Progress == nil {
		t.Fatalf("first line: %+v %v", first, err)
	}
	stop() // SIGTERM in `pyexec serve`

	var last httpapi.StreamLine[engine.Result]
	for last.Result == nil && last.Error == nil {
		if err := dec.Decode(&last); err != nil {
			t.Fatalf("stream ended without a result: %v", err)
		}
	}
	if last.Result == nil || last.Result.Stdout != "finished\n" || !last.Result.Success {
		t.Fatalf("last line %+v", last)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if c, err := net.Dial("tcp", url[len("http://"):]); err == nil {
		c.Close()
		t.Fatal("still accepting connections after shutdown")
	}
}

// TestShutdownGraceCancelsRuns: past the grace period, calls still running
// are cancelled (their trees killed) and Serve returns.
func TestShutdownGraceCancelsRuns(t *testing.T) {
	url, stop, served := startReal(t, 100*time.Millisecond)
	resp := postStream(t, context.Background(), url+"/v1/run", engine.Request{Code: "import time; time.sleep(120); print('never')", Timeout: 300})
	dec := json.NewDecoder(resp.Body)
	var l httpapi.StreamLine[engine.Result]
	if err := dec.Decode(&l); err != nil || l.Progress == nil {
		t.Fatalf("first line: %+v %v", l, err)
	}
	stop()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for {
		l = httpapi.StreamLine[engine.Result]{}
		if err := dec.Decode(&l); err != nil {
			break // the connection was closed: expected
		}
		if l.Result != nil && l.Result.Stdout == "never\n" {
			t.Fatal("the run finished although the grace period was over")
		}
	}
	// The server is gone.
	if _, err := http.Get(url + "/health"); err == nil {
		t.Fatal("server still answering")
	}
}

// TestSlowHeadersAreCut: a client that never finishes its headers is
// disconnected after ReadHeaderTimeout (slow loris), instead of holding a
// connection forever.
func TestSlowHeadersAreCut(t *testing.T) {
	f := newFixture(t)
	srv, err := httpapi.NewServer(httpapi.Options{Executor: f.local(t, nil), NoAuth: true, ReadHeaderTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln, time.Second)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("POST /v1/run HTTP/1.1\r\nHost: 127.0.0.1\r\n")); err != nil {
		t.Fatal(err)
	}
	// A safety net only: the server must close the connection well before.
	c.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 512)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // a 408 may come first
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server kept a half-sent request open")
		}
		break
	}
}

// TestLongRunOutlivesReadTimeout: the read timeouts bound how a request
// arrives, never how long its run takes.
func TestLongRunOutlivesReadTimeout(t *testing.T) {
	f := newFixture(t)
	srv, err := httpapi.NewServer(httpapi.Options{Executor: f.local(t, nil), NoAuth: true, ReadHeaderTimeout: 100 * time.Millisecond, ReadTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln, time.Second)
	r := do(t, "POST", "http://"+ln.Addr().String()+"/v1/run", engine.Request{Code: "import time; time.sleep(1); print('still here')"})
	var res engine.Result
	r.json(t, &res)
	if r.status != 200 || res.Stdout != "still here\n" {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

package httpapi_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
)

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestClientServerDown(t *testing.T) {
	url := "http://" + freeAddr(t)
	c, err := httpapi.NewClient(url, httpapi.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Every entry point fails at once with the same clear message (no
	// retries, no waiting for a timeout).
	calls := map[string]func() error{
		"run": func() error { _, err := c.Run(context.Background(), engine.Request{Code: "1"}, nil); return err },
		"batch": func() error {
			_, err := c.Batch(context.Background(), executor.BatchRequest{Requests: []engine.Request{{Code: "1"}}}, nil)
			return err
		},
		"info": func() error { _, err := c.Info(context.Background()); return err },
	}
	for name, call := range calls {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "cannot reach execution server at "+url) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestClientBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://"} {
		if _, err := httpapi.NewClient(u, httpapi.ClientOptions{}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

func TestClientErrors(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), func(o *httpapi.Options) { o.Token = "right" })

	wrong, _ := httpapi.NewClient(ts.URL, httpapi.ClientOptions{Token: "wrong"})
	_, err := wrong.Run(context.Background(), engine.Request{Code: "1"}, nil)
	var re *httpapi.RemoteError
	if !errors.As(err, &re) || re.Detail.Code != httpapi.CodeUnauthorized || !strings.Contains(err.Error(), "token") {
		t.Fatalf("wrong token: %v", err)
	}

	c, _ := httpapi.NewClient(ts.URL+"/", httpapi.ClientOptions{Token: "right"})
	_, err = c.Run(context.Background(), engine.Request{ScriptPath: "../x.py"}, nil)
	var reqErr *engine.RequestError
	if !errors.As(err, &reqErr) || reqErr.Field != "script_path" {
		t.Fatalf("rejected request: %T %v", err, err)
	}
	// Exactly the local executor's error.
	_, lerr := f.local(t, nil).Run(context.Background(), engine.Request{ScriptPath: "../x.py"}, nil)
	if lerr == nil || lerr.Error() != err.Error() {
		t.Fatalf("local %q, remote %q", lerr, err)
	}
}

func TestClientProgressAndCancel(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), nil)
	c, _ := httpapi.NewClient(ts.URL, httpapi.ClientOptions{})

	var beats atomic.Int64
	res, err := c.Run(context.Background(), engine.Request{Code: "import time; time.sleep(1.2); print('ok')"}, func(p executor.Progress) {
		if p.ElapsedSeconds > 0 && strings.Contains(p.Message, "running") {
			beats.Add(1)
		}
	})
	if err != nil || res.Stdout != "ok\n" || beats.Load() == 0 {
		t.Fatalf("run: %+v %v, %d beats", res, err, beats.Load())
	}

	// Cancelling the caller's context aborts the HTTP call, which cancels
	// the run on the server (its tree is killed); the caller gets its own
	// context error back.
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once atomic.Bool
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, engine.Request{Code: "import time; time.sleep(60)", Timeout: 120}, func(executor.Progress) {
			if once.CompareAndSwap(false, true) {
				close(started)
			}
		})
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
}

func TestClientBatch(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), nil)
	c, _ := httpapi.NewClient(ts.URL, httpapi.ClientOptions{})
	out, err := c.Batch(context.Background(), executor.BatchRequest{Requests: []engine.Request{{Code: "print(1)"}, {ScriptPath: "nope.py"}}}, nil)
	if err != nil || len(out.Results) != 2 || out.Results[0].Stdout != "1\n" || out.Results[1].Error == "" || out.Results[1].Index != 1 {
		t.Fatalf("batch: %+v %v", out, err)
	}
	_, err = c.Batch(context.Background(), executor.BatchRequest{}, nil)
	var reqErr *engine.RequestError
	if !errors.As(err, &reqErr) || reqErr.Field != "codes" {
		t.Fatalf("empty batch: %v", err)
	}
}

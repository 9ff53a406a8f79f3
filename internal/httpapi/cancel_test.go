package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/testutil/proc"
)

// startedScript starts a child marked with mark (a run's pids are its own
// PID namespace's: see testutil/proc), writes file, then sleeps.
func startedScript(file, mark string) string {
	return proc.Sleeper(mark) + "import os, time\nopen(" + strconv.Quote(file+".tmp") + ", 'w').write('started')\nos.rename(" + strconv.Quote(file+".tmp") + ", " + strconv.Quote(file) + ")\ntime.sleep(120)"
}

// waitFor polls cond (the events watched here happen in other processes;
// there is nothing to block on) and fails after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitStarted(t *testing.T, file string) {
	t.Helper()
	waitFor(t, "the run to start", func() bool {
		_, err := os.Stat(file)
		return err == nil
	})
}

func waitGone(t *testing.T, mark string) {
	t.Helper()
	waitFor(t, "the cancelled run's processes to die", func() bool { return len(proc.Marked(mark)) == 0 })
}

// TestCancellationKillsRemoteRuns: a caller that gives up kills the run on
// the execution server, whichever way it called: the Go client (remote
// executor), or a stateless MCP client over /mcp (the POST's cancellation
// propagates to the tool call).
func TestCancellationKillsRemoteRuns(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, withJobs(t, f.local(t, nil)), nil)

	t.Run("client", func(t *testing.T) {
		c, _ := httpapi.NewClient(ts.URL, httpapi.ClientOptions{})
		file, mark := filepath.Join(f.workspace, "started-client"), proc.Mark(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := c.Run(ctx, engine.Request{Code: startedScript(file, mark), Timeout: 300}, nil)
			done <- err
		}()
		waitStarted(t, file)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
		waitGone(t, mark)
	})

	t.Run("stateless mcp", func(t *testing.T) {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: http.DefaultClient}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if cs.ID() != "" {
			t.Fatal("expected a stateless session")
		}
		file, mark := filepath.Join(f.workspace, "started-mcp"), proc.Mark(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": startedScript(file, mark), "timeout": 300}})
			done <- err
		}()
		waitStarted(t, file)
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the cancelled call returned no error")
		}
		waitGone(t, mark)
	})
}

package httpapi_test

import (
	"context"
	"errors"
	"github.com/pyexec/pyexec/internal/testutil/proc"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/httpapi"
)

// pidScript writes its pid to file, then sleeps.
func pidScript(file string) string {
	return "import os, time\nopen(" + strconv.Quote(file+".tmp") + ", 'w').write(str(os.getpid()))\nos.rename(" + strconv.Quote(file+".tmp") + ", " + strconv.Quote(file) + ")\ntime.sleep(120)"
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

func readPID(t *testing.T, file string) int {
	t.Helper()
	var pid int
	waitFor(t, "the run to start", func() bool {
		data, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil
	})
	return pid
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, "the cancelled run's process to die", func() bool { return proc.Gone(pid) })
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
		file := filepath.Join(f.workspace, "pid-client")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := c.Run(ctx, engine.Request{Code: pidScript(file), Timeout: 300}, nil)
			done <- err
		}()
		pid := readPID(t, file)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
		waitGone(t, pid)
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
		file := filepath.Join(f.workspace, "pid-mcp")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": pidScript(file), "timeout": 300}})
			done <- err
		}()
		pid := readPID(t, file)
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the cancelled call returned no error")
		}
		waitGone(t, pid)
	})
}

package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/mcpserver"
	"github.com/pyexec/pyexec/internal/scripts"
)

// testServer describes a server to start: in memory or as a subprocess.
type testServer struct {
	workspace  string
	stateDir   string
	toolsets   string // "" = default
	maxWorkers int
}

// connectInMemory serves a pyexec MCP server over in-memory transports.
func connectInMemory(t *testing.T, s testServer) (*mcp.ClientSession, *scripts.Store) {
	t.Helper()
	if s.stateDir == "" {
		s.stateDir = t.TempDir()
	}
	eng, err := engine.New(engine.Config{Workspace: s.workspace, StateDir: s.stateDir})
	if err != nil {
		t.Fatal(err)
	}
	store, err := scripts.Open(s.stateDir, scripts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	opts := mcpserver.Options{Version: "test", Scripts: store}
	if s.toolsets != "" {
		if opts.Toolsets, err = mcpserver.ParseToolsets(s.toolsets); err != nil {
			t.Fatal(err)
		}
	}
	srv := mcpserver.New(executor.NewLocal(eng, "test", s.maxWorkers), opts)
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, store
}

// connectSubprocess starts this test binary as `pyexec mcp` (see TestMain)
// and talks to it over stdio, as an MCP client would.
func connectSubprocess(t *testing.T, s testServer) *mcp.ClientSession {
	t.Helper()
	if s.stateDir == "" {
		s.stateDir = t.TempDir()
	}
	args := []string{"mcp", "--workspace", s.workspace, "--state-dir", s.stateDir, "--log-level", "warn"}
	if s.toolsets != "" {
		args = append(args, "--toolsets", s.toolsets)
	}
	if s.maxWorkers > 0 {
		args = append(args, "--max-workers", itoa(s.maxWorkers))
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCLI+"=1")
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// call runs a tool and returns its structured content as a map, the text
// content, and whether it was a tool error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, string, bool) {
	t.Helper()
	out, text, isErr, err := callErr(cs, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return out, text, isErr
}

// callNoT is call for helpers that run outside a test's goroutine; errors
// surface as an empty result.
func callNoT(cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, string, bool) {
	out, text, isErr, _ := callErr(cs, tool, args)
	return out, text, isErr
}

func callErr(cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, string, bool, error) {
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, "", false, fmt.Errorf("protocol error: %w", err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, "", false, err
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, "", false, err
		}
	}
	return out, strings.Join(text, "\n"), res.IsError, nil
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(dirOf(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func dirOf(p string) string {
	if i := strings.LastIndex(p, "/"); i > 0 {
		return p[:i]
	}
	return "."
}

// Package mcptest connects a real go-sdk MCP client to a pyexec MCP server
// for tests: over in-memory transports, or to `pyexec mcp` run as a
// subprocess over stdio, and calls tools returning their structured content
// as plain JSON values.
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connect serves srv over in-memory transports and returns a connected
// client session, closed when the test ends.
func Connect(t testing.TB, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// Command starts cmd (a pyexec binary running `mcp`) and connects to it over
// stdio, as an MCP client application would.
func Command(t testing.TB, cmd *exec.Cmd) *mcp.ClientSession {
	t.Helper()
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Call runs a tool and returns its structured content as a JSON map, its
// text content, and whether it was a tool error. A protocol error fails the
// test.
func Call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, string, bool) {
	t.Helper()
	out, text, isErr, err := TryCall(cs, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return out, text, isErr
}

// TryCall is Call returning protocol errors instead of failing a test.
func TryCall(cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, string, bool, error) {
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

// ToolNames lists the tools the server offers.
func ToolNames(t testing.TB, cs *mcp.ClientSession) []string {
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

// WriteFile writes content to path, creating its directories.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

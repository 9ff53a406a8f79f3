package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/testutil/pyinterp"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// TestRunPythonWithDependencies is the dependencies issue's "done when": an
// MCP client sends dependencies and a PEP 723 script to run_python and gets
// resolved_dependencies back; the second identical call reuses the env.
func TestRunPythonWithDependencies(t *testing.T) {
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	eng, err := engine.New(engine.Config{
		Workspace: t.TempDir(), StateDir: t.TempDir(), Python: pyinterp.Real(t),
		Deps: engine.DepsConfig{Index: uvenv.IndexSettings{NoIndex: true, Offline: true, FindLinks: []string{wheels.Dir(t)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	t.Cleanup(func() { eng.Close() })
	srv := New(executor.NewLocal(eng, "test", 2), Options{Version: "test"})
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	pep723 := "# /// script\n# dependencies = [\"pyexec-beta\"]\n# ///\nimport pyexec_alpha\nprint(pyexec_alpha.__version__)\n"
	for _, args := range []map[string]any{
		{"code": "import pyexec_alpha; print(pyexec_alpha.__version__)", "dependencies": []string{"pyexec-alpha==1.0"}},
		{"code": pep723},
		{"code": pep723}, // second identical call: cache hit
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("tool error: %v", res.Content)
		}
		data, _ := json.Marshal(res.StructuredContent)
		var out engine.Result
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		if out.ExecutionStrategy != "uv-env" || len(out.ResolvedDependencies) == 0 || !out.Success {
			t.Fatalf("%v: %+v", args, out)
		}
		want := "2.0\n"
		if slices.Contains(out.ResolvedDependencies, "pyexec-alpha==1.0") {
			want = "1.0\n"
		}
		if out.Stdout != want {
			t.Fatalf("stdout %q, want %q", out.Stdout, want)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "dependencies: pyexec-alpha==") {
			t.Fatalf("markdown lacks the dependencies: %s", text)
		}
	}
	if n := eng.Environments().Builds(); n != 2 {
		t.Fatalf("%d environment builds, want 2", n)
	}

	// A conflict is a tool error carrying uv's explanation.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{
		"code": "pass", "dependencies": []string{"pyexec-gamma"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "No solution found") {
		t.Fatalf("conflict: %+v", res.Content)
	}
}

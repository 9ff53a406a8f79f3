package mcpserver

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/scripts"
	"github.com/pyexec/pyexec/internal/testutil/mcptest"
)

// testServer describes a server for the toolset, scripts, benchmark,
// planning and compat tests.
type testServer struct {
	workspace  string
	toolsets   string // "" = default
	maxWorkers int
}

// connectWithStore serves the tools with a script store over in-memory
// transports.
func connectWithStore(t *testing.T, s testServer) (*mcp.ClientSession, *scripts.Store) {
	t.Helper()
	state := t.TempDir()
	eng, err := engine.New(engine.Config{Workspace: s.workspace, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	store, err := scripts.Open(state, scripts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	opts := Options{Version: "test", Scripts: executor.LocalScripts{Store: store}}
	if s.toolsets != "" {
		if opts.Toolsets, err = ParseToolsets(s.toolsets); err != nil {
			t.Fatal(err)
		}
	}
	return mcptest.Connect(t, New(executor.NewLocal(eng, "test", s.maxWorkers), opts)), store
}

package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// Packages mid-session and named environments in sessions, through a real
// MCP client, against the local executor and against a remote server (the
// httpapi.Client): the same calls, the same answers. Hermetic: uv reads
// only the tiny test wheels.
func TestMCPSessionPackagesLocalAndRemote(t *testing.T) {
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	f := newFixture(t)
	whl := wheels.Dir(t)
	deps := func(c *engine.Config) {
		c.Deps = engine.DepsConfig{Index: uvenv.IndexSettings{NoIndex: true, Offline: true, FindLinks: []string{whl}}}
	}
	ts, _ := serve(t, withJobs(t, f.local(t, deps)), func(o *httpapi.Options) { o.Token = "tok" })
	remote, err := httpapi.NewClient(ts.URL, httpapi.ClientOptions{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	var lp, rp atomic.Int64
	for _, e := range []struct {
		name string
		cs   *mcp.ClientSession
	}{
		{"local", connectInMemory(t, withJobs(t, newFixture(t).local(t, deps)), &lp)},
		{"remote", connectInMemory(t, remote, &rp)},
	} {
		t.Run(e.name, func(t *testing.T) {
			call := func(tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
				t.Helper()
				r, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					t.Fatalf("%s: %v", tool, err)
				}
				var s map[string]any
				data, _ := json.Marshal(r.StructuredContent)
				_ = json.Unmarshal(data, &s)
				return r, s
			}
			// dependencies on a later call: installed, imported at once, the
			// namespace kept.
			r, s := call("run_python", map[string]any{"session": "pk", "code": "x = 1"})
			wantOK(t, r)
			r, s = call("run_python", map[string]any{"session": "pk", "code": "import pyexec_beta\n(x, pyexec_beta.NAME)", "dependencies": []string{"pyexec-beta"}})
			wantOK(t, r)
			if s["result"] != "(1, 'pyexec_beta')" || fmt.Sprint(s["installed"]) != "[pyexec-beta]" || !strings.Contains(text(r), "installed into the session: pyexec-beta") {
				t.Fatalf("dependencies mid-session: %v\n%s", s, text(r))
			}
			// pip install inside a cell.
			r, s = call("run_python", map[string]any{"session": "pk", "code": "import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'pip', 'install', '-q', 'pyexec-tool'], check=True)\nimport pyexec_tool\npyexec_tool.NAME"})
			wantOK(t, r)
			if s["result"] != "'pyexec_tool'" {
				t.Fatalf("python -m pip install in a cell: %v\n%s", s, text(r))
			}
			// Network denied: the error says so and names the field.
			r, _ = call("session_create", map[string]any{"session": "nonet", "network": "deny"})
			wantOK(t, r)
			r, _ = call("run_python", map[string]any{"session": "nonet", "code": "1", "dependencies": []string{"pyexec-absent"}})
			if !r.IsError || !strings.Contains(text(r), "network is denied") || !strings.Contains(text(r), "dependencies") {
				t.Fatalf("install under network deny: %s", text(r))
			}
			// A named environment.
			r, _ = call("env_create", map[string]any{"name": "nb-" + e.name, "dependencies": []string{"pyexec-alpha==2.0"}})
			wantOK(t, r)
			r, s = call("session_create", map[string]any{"session": "ne", "env": "nb-" + e.name})
			wantOK(t, r)
			if st, _ := s["settings"].(map[string]any); st["env"] != "nb-"+e.name {
				t.Fatalf("session_create env: %v", s)
			}
			r, s = call("run_python", map[string]any{"session": "ne", "code": "import pyexec_alpha\npyexec_alpha.__version__"})
			wantOK(t, r)
			if s["result"] != "'2.0'" {
				t.Fatalf("cell in the named environment: %v", s)
			}
			r, _ = call("run_python", map[string]any{"session": "ne2", "code": "1", "env": "nb-" + e.name})
			wantOK(t, r)
			r, _ = call("run_python", map[string]any{"session": "ne2", "code": "1", "env": "other"})
			if !r.IsError || !strings.Contains(text(r), "env") {
				t.Fatalf("switching environments: %s", text(r))
			}
			for _, n := range []string{"pk", "nonet", "ne", "ne2"} {
				call("session_close", map[string]any{"session": n})
			}
		})
	}
}

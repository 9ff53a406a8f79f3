package cli

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A server started in / (an MCP client config without --workspace), or
// told to use a system directory or the whole home directory, refuses to
// start and says what to pass.
func TestWorkspaceRootRefused(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	for _, tc := range []struct {
		name string
		dir  string
		args []string
		want string
	}{
		{"mcp started in /", "/", []string{"mcp"}, "the workspace defaults to the current directory"},
		{"run --workspace /usr", "", []string{"run", "--workspace", "/usr", "-c", "print(1)"}, "inside the system directory /usr"},
		{"serve --workspace home", "", []string{"serve", "--workspace", home, "--listen", "127.0.0.1:0"}, "whole home directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(exe, tc.args...)
			cmd.Dir = tc.dir
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "PYEXEC_WORKSPACE=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, "PYEXEC_TEST_AS_CLI=1", "PYEXEC_STATE_DIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("started anyway: %s", out)
			}
			if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "--workspace DIR") {
				t.Errorf("output does not say why and what to pass: %s", out)
			}
		})
	}
}

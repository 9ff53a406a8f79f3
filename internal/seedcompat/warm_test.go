package seedcompat

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/testutil/mcptest"
)

// TestBenchmarkProfileWithWarmInterpreters: the profiled run's argv is
// python -u WRAPPER ... FILE ARGS, the plain shape warm interpreters serve,
// so the profile must come back whether the run went warm or cold.
func TestBenchmarkProfileWithWarmInterpreters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a pyexec mcp subprocess")
	}
	cmd := exec.Command(os.Args[0], "mcp", "--workspace", t.TempDir(), "--state-dir", t.TempDir(), "--log-level", "warn", "--warm", "2")
	cmd.Env = append(os.Environ(), asCLI+"=1")
	cs := mcptest.Command(t, cmd)
	for i := range 3 {
		out, text, isErr := mcptest.Call(t, cs, "benchmark_python", map[string]any{
			"code": "import sys\ndef hot_loop():\n    return sum(range(100000))\nprint(hot_loop(), sys.argv[1:])", "args": []string{"a b"}, "repeat": 2, "profile": true,
		})
		var names []string
		rows, _ := out["profile"].([]any)
		for _, r := range rows {
			names = append(names, r.(map[string]any)["function"].(string))
		}
		if isErr || out["stdout"] != "4999950000 ['a b']\n" || !strings.Contains(strings.Join(names, " "), "hot_loop") {
			t.Errorf("call %d: profile %v, result %v %q", i, names, out["stdout"], text)
		}
	}
}

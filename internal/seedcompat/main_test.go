package seedcompat

import (
	"os"
	"testing"

	"github.com/pyexec/pyexec/internal/cli"
	"github.com/pyexec/pyexec/internal/launcher"
)

// asCLI makes this test binary act as the pyexec binary, so the end-to-end
// test can start `pyexec mcp` as a subprocess without building it.
const asCLI = "PYEXEC_TEST_AS_CLI"

// TestMain lets this test binary act as the per-run launcher, and as the
// pyexec CLI when asCLI is set.
func TestMain(m *testing.M) {
	launcher.MaybeRun()
	if os.Getenv(asCLI) == "1" {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

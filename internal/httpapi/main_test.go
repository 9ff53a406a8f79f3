package httpapi_test

import (
	"os"
	"testing"

	"github.com/pyexec/pyexec/internal/cli"
	"github.com/pyexec/pyexec/internal/launcher"
)

// TestMain lets this test binary act as the per-run launcher, exactly as the
// pyexec binary does, and as the pyexec command itself (pyexec mcp over
// stdio, for the suite of what a model sees).
func TestMain(m *testing.M) {
	launcher.MaybeRun()
	if os.Getenv("PYEXEC_TEST_AS_CLI") == "1" {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

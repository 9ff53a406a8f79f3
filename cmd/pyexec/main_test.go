package main

import (
	"os"
	"testing"

	"github.com/pyexec/pyexec/internal/cli"
	"github.com/pyexec/pyexec/internal/launcher"
)

// TestMain lets this test binary act as the per-run launcher and, when
// PYEXEC_TEST_AS_CLI=1, as the pyexec binary itself: end-to-end tests start
// it as `pyexec serve` and `pyexec mcp` subprocesses without a build step.
func TestMain(m *testing.M) {
	launcher.MaybeRun()
	if os.Getenv("PYEXEC_TEST_AS_CLI") == "1" {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

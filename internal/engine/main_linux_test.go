package engine

import (
	"os"
	"testing"

	"github.com/pyexec/pyexec/internal/launcher"
)

// TestMain lets this test binary act as the per-run launcher, exactly as the
// pyexec binary does, and runs the tests cold and warm (warm_main_test.go).
func TestMain(m *testing.M) {
	launcher.MaybeRun()
	os.Exit(runBothModes(m))
}

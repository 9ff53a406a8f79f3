package httpapi_test

import (
	"os"
	"testing"

	"github.com/pyexec/pyexec/internal/launcher"
)

// TestMain lets this test binary act as the per-run launcher, exactly as the
// pyexec binary does.
func TestMain(m *testing.M) {
	launcher.MaybeRun()
	os.Exit(m.Run())
}

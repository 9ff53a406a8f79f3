package uvenv

import (
	"os/exec"
	"testing"
)

func asNobody(t *testing.T, _ *exec.Cmd) { t.Skip("no uid to switch to on Windows") }

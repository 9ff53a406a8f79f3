// Package pyinterp finds a real Python interpreter for tests.
package pyinterp

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Real returns the path of a real CPython binary (never a pyenv shim), or
// skips the test when there is none. Debian's /usr/bin/python3.11 comes
// first: it lives outside root's 0700 home, so runs executing as an
// unprivileged uid can use environments built on it. Otherwise python3 on
// PATH is asked for its sys.executable.
func Real(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3.11", "/usr/bin/python3"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	out, err := exec.Command("python3", "-S", "-c", "import sys; print(sys.executable)").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Skip("no Python interpreter found")
	}
	return strings.TrimSpace(string(out))
}

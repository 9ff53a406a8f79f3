package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/testutil/mounts"
)

// openPTY returns a pseudo-terminal's controller and its terminal end.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	ptmx = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	return ptmx, tty
}

// TestMCPOnTerminalSaysItWaits starts `pyexec mcp` as a person would, at a
// terminal, and expects the one stderr line saying it waits for an MCP
// client and how to try it; started by a client (stdin a pipe) it stays
// quiet.
func TestMCPOnTerminalSaysItWaits(t *testing.T) {
	const hint = "pyexec mcp: waiting for an MCP client on stdin"
	_, tty := openPTY(t)
	state := t.TempDir()
	mounts.CleanupWaitsFor(t, state)
	cmd := asCLI("mcp", "--warm", "0", "--state-dir", state)
	cmd.Dir = t.TempDir()
	cmd.Stdin = tty
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var seen []string
	sc := bufio.NewScanner(stderr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.HasPrefix(sc.Text(), hint) {
			if !strings.Contains(sc.Text(), `"method":"initialize"`) {
				t.Fatalf("the hint does not say how to try it: %q", sc.Text())
			}
			break
		}
	}
	if len(seen) == 0 || !strings.HasPrefix(seen[len(seen)-1], hint) {
		t.Fatalf("no waiting hint on stderr; got %q", seen)
	}

	// Started by an MCP client: stdin is a pipe, and the hint would be noise.
	quiet := asCLI("mcp", "--warm", "0", "--state-dir", t.TempDir())
	quiet.Dir = t.TempDir()
	quiet.Stdin = strings.NewReader("") // EOF at once: the server exits
	var buf bytes.Buffer
	quiet.Stderr = &buf
	if err := quiet.Run(); err != nil {
		t.Fatalf("pyexec mcp with stdin at EOF: %v\n%s", err, buf.String())
	}
	if strings.Contains(buf.String(), hint) {
		t.Fatalf("hint printed with stdin a pipe:\n%s", buf.String())
	}
}

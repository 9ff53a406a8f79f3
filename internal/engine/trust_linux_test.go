package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pyexec/pyexec/internal/testutil/pyinterp"
	"github.com/pyexec/pyexec/internal/workspace"
)

// TestTrustNeedsSecureOwnership: a path is trusted (executed by the server)
// only when it is one of the server's interpreters and nothing on its way
// belongs to another user or is writable by others. The very same binary,
// hard-linked into another user's directory, is someone else's file to
// swap: it is learned without the server executing it.
func TestTrustNeedsSecureOwnership(t *testing.T) {
	needRoot(t)
	python := pyinterp.Real(t)
	e, _ := newTestEngine(t, func(c *Config) { c.Python = python })
	ctx := context.Background()
	if _, err := e.DefaultInterpreter(ctx); err != nil {
		t.Fatal(err)
	}
	if !e.interps.trustedAt(python) {
		t.Fatalf("%s is not trusted", python)
	}
	dir, err := os.MkdirTemp("/var/tmp", "pyexec-other-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	os.Chown(dir, 1234, 1234)
	linked := filepath.Join(dir, "python3")
	real, _ := filepath.EvalSymlinks(python)
	if err := os.Link(real, linked); err != nil {
		t.Skip("cannot hard-link the interpreter here:", err)
	}
	if e.interps.trustedAt(linked) {
		t.Fatal("a hard link in another user's directory is trusted")
	}
	req := Request{Code: "pass", Python: linked}
	it, _, err := e.chooseInterpreter(ctx, &req, e.cfg.Workspace, workspace.ServerRights)
	if err != nil {
		t.Fatal(err)
	}
	if it.kind != kindRequest || it.base != "" {
		t.Fatalf("interpreter %+v: want an untrusted one without a base", it)
	}
}

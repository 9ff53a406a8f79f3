package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newRoot(t *testing.T) (*Root, string) {
	t.Helper()
	r, err := NewRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return r, r.Dir()
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	r, ws := newRoot(t)
	outside := t.TempDir()
	write(t, filepath.Join(ws, "a", "b.py"), "", 0o644)
	write(t, filepath.Join(outside, "x.py"), "", 0o644)
	os.Symlink(filepath.Join(outside, "x.py"), filepath.Join(ws, "out.py"))
	os.Symlink("a/b.py", filepath.Join(ws, "in.py"))
	tests := []struct {
		p, want, err string
	}{
		{p: "a/b.py", want: filepath.Join(ws, "a", "b.py")},
		{p: "in.py", want: filepath.Join(ws, "a", "b.py")},
		{p: "out.py", err: "through a symlink"},
		{p: "../" + filepath.Base(outside) + "/x.py", err: "outside the workspace"},
		{p: "/etc/passwd", err: "outside the workspace"},
		{p: "missing.py", err: "does not exist in the workspace"},
		{p: "/nonexistent/x", err: "outside the workspace"},
		{p: "a\x00b", err: "NUL"},
	}
	for _, tt := range tests {
		got, err := r.Resolve(tt.p, ws)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Resolve(%q) = %q, %v; want error %q", tt.p, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tt.p, got, err, tt.want)
		}
	}
	if _, err := r.ResolveScript("a", ws); err == nil || !strings.Contains(err.Error(), "not a .py file") {
		t.Errorf("ResolveScript of a directory without .py: %v", err)
	}
	if _, err := r.ResolveDir("a/b.py"); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("ResolveDir of a file: %v", err)
	}
}

// TestOpenRefusesSymlinks: a symlink anywhere on the way, or as the file
// itself, is refused, even when it points inside the workspace (Open takes
// the path Resolve returned: any symlink on it appeared since).
func TestOpenRefusesSymlinks(t *testing.T) {
	r, ws := newRoot(t)
	write(t, filepath.Join(ws, "d", ".env"), "A=1\n", 0o644)
	secret := filepath.Join(t.TempDir(), "secret")
	write(t, secret, "TOP-SECRET", 0o600)
	os.Symlink(secret, filepath.Join(ws, "link.env"))
	os.Symlink("d", filepath.Join(ws, "dlink"))
	os.Symlink(filepath.Join(ws, "d", ".env"), filepath.Join(ws, "inside.env"))

	if data, err := r.ReadFile(filepath.Join(ws, "d", ".env"), ServerRights, 1<<20); err != nil || string(data) != "A=1\n" {
		t.Fatalf("plain file: %q %v", data, err)
	}
	for _, p := range []string{"link.env", "dlink/.env", "inside.env"} {
		data, err := r.ReadFile(filepath.Join(ws, p), ServerRights, 1<<20)
		if !errors.Is(err, ErrChanged) {
			t.Errorf("%s: got %q, %v; want ErrChanged", p, data, err)
		}
	}
	if _, err := r.ReadFile(secret, ServerRights, 0); err == nil {
		t.Error("a path outside the workspace was opened")
	}
	if _, err := r.ReadFile(filepath.Join(ws, "nope"), ServerRights, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}

func TestOpenLimit(t *testing.T) {
	r, ws := newRoot(t)
	write(t, filepath.Join(ws, "big"), strings.Repeat("x", 100), 0o644)
	if _, err := r.ReadFile(filepath.Join(ws, "big"), ServerRights, 99); err == nil || !strings.Contains(err.Error(), "larger than 99 bytes") {
		t.Fatalf("over the limit: %v", err)
	}
	if data, err := r.ReadFile(filepath.Join(ws, "big"), ServerRights, 100); err != nil || len(data) != 100 {
		t.Fatalf("at the limit: %d %v", len(data), err)
	}
}

// TestRights: the run user's rights decide, on the opened file and every
// directory on the way, by owner, group and mode; an idmapped workspace
// makes the server's files the run's own.
func TestRights(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (files of several owners)")
	}
	r, ws := newRoot(t)
	os.Chmod(ws, 0o755)
	nobody := Rights{UID: 65534, GID: 65534}
	idmapped := Rights{UID: 65534, GID: 65534, Idmapped: true, ServerUID: 0, ServerGID: 0}
	rootNoCaps := Rights{UID: 0, GID: 0}
	type file struct {
		name      string
		uid, gid  int
		mode      os.FileMode
		dirMode   os.FileMode // of its directory (0: the workspace root)
		nobody    bool
		idmap     bool
		rootNoCap bool
	}
	files := []file{
		{name: "world.txt", mode: 0o644, nobody: true, idmap: true, rootNoCap: true},
		{name: "rootonly.txt", mode: 0o600, nobody: false, idmap: true, rootNoCap: true},
		{name: "theirs.txt", uid: 1234, gid: 1234, mode: 0o600, nobody: false, idmap: false, rootNoCap: false},
		{name: "nobodys.txt", uid: 65534, gid: 65534, mode: 0o600, nobody: true, idmap: false, rootNoCap: false},
		{name: "closed/inner.txt", mode: 0o644, dirMode: 0o700, nobody: false, idmap: true, rootNoCap: true},
	}
	for _, f := range files {
		p := filepath.Join(ws, f.name)
		write(t, p, "x", f.mode)
		os.Chown(p, f.uid, f.gid)
		if f.dirMode != 0 {
			os.Chmod(filepath.Dir(p), f.dirMode)
		}
	}
	for _, f := range files {
		for _, c := range []struct {
			who  string
			r    Rights
			want bool
		}{{"nobody", nobody, f.nobody}, {"idmapped nobody", idmapped, f.idmap}, {"root without capabilities", rootNoCaps, f.rootNoCap}, {"server", ServerRights, true}} {
			_, err := r.ReadFile(filepath.Join(ws, f.name), c.r, 0)
			if got := err == nil; got != c.want {
				t.Errorf("%s read by %s: err %v, want allowed=%v", f.name, c.who, err, c.want)
			}
		}
	}
}

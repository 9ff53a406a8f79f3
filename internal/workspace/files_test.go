package workspace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func setup(t *testing.T, id Identity) (*Root, string, string) {
	t.Helper()
	ws := t.TempDir()
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644))
	must(t, os.MkdirAll(filepath.Join(ws, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "sub", "a.txt"), []byte("hello"), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "link")))
	must(t, os.Symlink(outside, filepath.Join(ws, "dirlink")))
	r, err := OpenRoot(ws, id)
	must(t, err)
	t.Cleanup(func() { r.Close() })
	return r, ws, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadRules(t *testing.T) {
	r, ws, outside := setup(t, Identity{})
	must(t, os.Link(filepath.Join(outside, "secret"), filepath.Join(ws, "hard")))
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
	for _, tc := range []struct {
		path, want string // want: content, or a fragment of the error
	}{
		{"sub/a.txt", "hello"},
		{"link", "symlink"},
		{"dirlink/secret", "symlink"},
		{"../x", ".."},
		{"/etc/passwd", "relative"},
		{"hard", "hard links"},
		{"fifo", "not a regular file"},
		{"sub", "directory"},
		{"missing", "does not exist"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rel, err := Clean("path", tc.path)
			var data []byte
			if err == nil {
				data, _, err = r.ReadFile("path", rel, 0, 100)
			}
			got := string(data)
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("read %q = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

func TestReadHeldToRunIdentity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file runs cannot read")
	}
	r, ws, _ := setup(t, Identity{Checked: true, UID: 65534, GID: 65534})
	must(t, os.WriteFile(filepath.Join(ws, "rootonly"), []byte("x"), 0o600))
	if _, _, err := r.ReadFile("path", "rootonly", 0, 10); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("root-only file read: %v", err)
	}
	if _, _, err := r.ReadFile("path", "sub/a.txt", 0, 10); err != nil {
		t.Fatalf("world-readable file: %v", err)
	}
	if _, err := r.WriteFile("path", "sub/new.txt", strings.NewReader("x"), WriteOptions{}); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("write into a dir runs cannot write: %v", err)
	}
}

func TestWriteRules(t *testing.T) {
	r, ws, outside := setup(t, Identity{})
	// New file, then refusing to overwrite it by default.
	if _, err := r.WriteFile("path", "new/deep/f.txt", strings.NewReader("one"), WriteOptions{MkdirAll: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteFile("path", "new/deep/f.txt", strings.NewReader("two"), WriteOptions{}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second write without overwrite: %v", err)
	}
	// Overwriting a symlink replaces the link; the target outside is untouched.
	if _, err := r.WriteFile("path", "link", strings.NewReader("mine"), WriteOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Fatalf("write through a symlink changed the target: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(ws, "link")); fi.Mode()&os.ModeSymlink != 0 {
		t.Fatal("link still a symlink")
	}
	// Through a symlinked directory: refused.
	if _, err := r.WriteFile("path", "dirlink/x", strings.NewReader("x"), WriteOptions{}); err == nil {
		t.Fatal("write through a symlinked directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Fatal("file created outside the workspace")
	}
	// A setuid file is replaced by a plain one.
	must(t, os.WriteFile(filepath.Join(ws, "suid"), []byte("x"), 0o755))
	must(t, os.Chmod(filepath.Join(ws, "suid"), 0o4755))
	fi, err := r.WriteFile("path", "suid", strings.NewReader("y"), WriteOptions{Overwrite: true})
	if err != nil || fi.Mode != "0644" {
		t.Fatalf("overwrite setuid: %+v, %v", fi, err)
	}
	// The upload limit.
	if _, err := r.WriteFile("path", "big", bytes.NewReader(make([]byte, 11)), WriteOptions{MaxBytes: 10}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "big")); err == nil {
		t.Fatal("oversized upload left a file")
	}
	// Delete: a file, not through a link, not a full directory.
	must(t, r.Delete("path", "new/deep/f.txt"))
	if err := r.Delete("path", "sub"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("delete non-empty dir: %v", err)
	}
	if err := r.Delete("path", "dirlink/secret"); err == nil {
		t.Fatal("delete through a symlinked dir succeeded")
	}
}

func TestList(t *testing.T) {
	r, _, _ := setup(t, Identity{})
	all, truncated, err := r.List("dir", "", ListOptions{Recursive: true})
	must(t, err)
	var paths []string
	for _, fi := range all {
		paths = append(paths, fi.Path+":"+fi.Type)
	}
	if got, want := strings.Join(paths, " "), "dirlink:symlink link:symlink sub:dir sub/a.txt:file"; got != want || truncated {
		t.Fatalf("list = %s (truncated %v), want %s", got, truncated, want)
	}
	some, truncated, err := r.List("dir", "", ListOptions{Recursive: true, Pattern: "*.txt", Limit: 5})
	if err != nil || len(some) != 1 || some[0].MIME != "text/plain" || truncated {
		t.Fatalf("pattern list = %+v %v %v", some, truncated, err)
	}
	if _, _, err := r.List("dir", "dirlink", ListOptions{}); err == nil {
		t.Fatal("listing through a symlink succeeded")
	}
}

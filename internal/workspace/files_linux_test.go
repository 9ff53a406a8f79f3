package workspace

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// filesRoot is a workspace with a file, a directory, symlinks in and out,
// and a secret outside.
func filesRoot(t *testing.T) (*Root, string, string) {
	t.Helper()
	r, ws := newRoot(t)
	os.Chmod(ws, 0o755)
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret"), "secret", 0o644)
	write(t, filepath.Join(ws, "sub", "a.txt"), "hello", 0o644)
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "link")))
	must(t, os.Symlink(outside, filepath.Join(ws, "dirlink")))
	must(t, os.Symlink("sub/a.txt", filepath.Join(ws, "inlink")))
	must(t, os.Symlink("sub", filepath.Join(ws, "subdir")))
	return r, ws, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func fp(t *testing.T, r *Root, p string) string {
	t.Helper()
	abs, err := r.FilePath(p)
	must(t, err)
	return abs
}

func TestFilePath(t *testing.T) {
	r, ws := newRoot(t)
	r = r.HideTree(filepath.Join(ws, ".state"))
	for _, tc := range []struct{ p, want, err string }{
		{p: "a/b.txt", want: filepath.Join(ws, "a/b.txt")},
		{p: filepath.Join(ws, "x"), want: filepath.Join(ws, "x")},
		{p: "", want: ws},
		{p: "a/../b", want: filepath.Join(ws, "b")},
		{p: "../x", err: "outside the workspace"},
		{p: "/etc/passwd", err: "outside the workspace"},
		{p: "a\x00b", err: "NUL"},
		{p: ".state/jobs.db", err: "state directory"},
		{p: strings.Repeat("a", 5000), err: "limit of 4096"},
	} {
		got, err := r.FilePath(tc.p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalidPath) {
				t.Errorf("FilePath(%q) = %q, %v; want error %q", tc.p, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("FilePath(%q) = %q, %v; want %q", tc.p, got, err, tc.want)
		}
	}
}

func TestReadRules(t *testing.T) {
	r, ws, _ := filesRoot(t)
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
	for _, tc := range []struct {
		path, want string // want: content, or a fragment of the error
		is         error
	}{
		{path: "sub/a.txt", want: "hello"},
		{path: "inlink", want: "hello"},       // a symlink inside is followed
		{path: "subdir/a.txt", want: "hello"}, // through a directory link inside too
		{path: "link", want: "outside the workspace", is: fs.ErrPermission},
		{path: "dirlink/secret", want: "outside the workspace", is: fs.ErrPermission},
		{path: "fifo", want: "not a regular file"},
		{path: "sub", want: "is a directory", is: ErrIsDir},
		{path: "missing", want: "does not exist", is: fs.ErrNotExist},
		{path: "sub/a.txt/x", want: "not a directory", is: fs.ErrNotExist},
	} {
		t.Run(tc.path, func(t *testing.T) {
			data, fi, err := r.ReadAt(fp(t, r, tc.path), ServerRights, 0, 100)
			got := string(data)
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("read %q = %q (%v), want %q", tc.path, got, err, tc.want)
			}
			if err == nil && (fi.Size != 5 || fi.MIME != "text/plain" || fi.Type != "file") {
				t.Fatalf("info %+v", fi)
			}
		})
	}
	data, _, err := r.ReadAt(fp(t, r, "sub/a.txt"), ServerRights, 1, 3)
	if err != nil || string(data) != "ell" {
		t.Fatalf("range read: %q %v", data, err)
	}
	if data, _, err := r.ReadAt(fp(t, r, "sub/a.txt"), ServerRights, 99, 3); err != nil || len(data) != 0 {
		t.Fatalf("read past the end: %q %v", data, err)
	}
}

// TestFilesHeldToRunRights: nothing the run user could not read, write or
// delete is read, written or deleted; new files and directories belong to
// the run user (or to the server in an idmapped workspace, where that reads
// as the run's own).
func TestFilesHeldToRunRights(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: files of several owners")
	}
	nobody := Rights{UID: 65534, GID: 65534, ServerUID: 0, ServerGID: 0}
	idmapped := Rights{UID: 65534, GID: 65534, Idmapped: true, ServerUID: 0, ServerGID: 0}

	r, ws := newRoot(t)
	os.Chmod(ws, 0o755) // root's: nobody cannot write it unless idmapped
	write(t, filepath.Join(ws, "rootonly"), "x", 0o600)
	write(t, filepath.Join(ws, "open.txt"), "x", 0o644)
	if _, _, err := r.ReadAt(fp(t, r, "rootonly"), nobody, 0, 10); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("root-only file read for nobody: %v", err)
	}
	if _, _, err := r.ReadAt(fp(t, r, "rootonly"), idmapped, 0, 10); err != nil {
		t.Errorf("the server's file in an idmapped workspace is the run's own: %v", err)
	}
	if _, err := r.WriteFile(fp(t, r, "new.txt"), nobody, strings.NewReader("x"), WriteOptions{}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("write into a directory nobody cannot write: %v", err)
	}
	if err := r.Delete(fp(t, r, "open.txt"), nobody); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("delete in a directory nobody cannot write: %v", err)
	}
	if _, err := r.WriteFile(fp(t, r, "d/new.txt"), nobody, strings.NewReader("x"), WriteOptions{MkdirAll: true}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("mkdir in a directory nobody cannot write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "d")); err == nil {
		t.Error("a directory was made for a write that was refused")
	}
	fi, err := r.WriteFile(fp(t, r, "id/new.txt"), idmapped, strings.NewReader("x"), WriteOptions{MkdirAll: true})
	if err != nil {
		t.Fatalf("idmapped write: %v", err)
	}
	if owner(t, filepath.Join(ws, fi.Path)) != 0 || owner(t, filepath.Join(ws, "id")) != 0 {
		t.Error("idmapped workspace: new files must stay the server's on disk (the run's own as it sees them)")
	}

	// A workspace nobody may write: new files are nobody's.
	open := filepath.Join(ws, "shared")
	must(t, os.Mkdir(open, 0o777))
	os.Chmod(open, os.ModeSticky|0o777) // like /tmp
	fi, err = r.WriteFile(fp(t, r, "shared/deep/n.txt"), nobody, strings.NewReader("x"), WriteOptions{MkdirAll: true})
	if err != nil {
		t.Fatalf("write as nobody: %v", err)
	}
	if owner(t, filepath.Join(ws, fi.Path)) != 65534 || owner(t, filepath.Join(open, "deep")) != 65534 {
		t.Error("new files and directories must be the run user's")
	}
	write(t, filepath.Join(open, "roots.txt"), "x", 0o666)
	if _, err := r.WriteFile(fp(t, r, "shared/roots.txt"), nobody, strings.NewReader("y"), WriteOptions{Overwrite: true}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("replacing another user's file in a sticky directory: %v", err)
	}
	if err := r.Delete(fp(t, r, "shared/roots.txt"), nobody); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("deleting another user's file in a sticky directory: %v", err)
	}
	if err := r.Delete(fp(t, r, "shared/deep/n.txt"), nobody); err != nil {
		t.Errorf("deleting its own file: %v", err)
	}
}

func owner(t *testing.T, p string) uint32 {
	t.Helper()
	fi, err := os.Lstat(p)
	must(t, err)
	return fi.Sys().(*syscall.Stat_t).Uid
}

func TestWriteRules(t *testing.T) {
	r, ws, outside := filesRoot(t)
	fi, err := r.WriteFile(fp(t, r, "new/deep/f.txt"), ServerRights, strings.NewReader("one"), WriteOptions{MkdirAll: true})
	if err != nil || fi.Size != 3 || fi.SHA256 != "7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed" || fi.Path != "new/deep/f.txt" {
		t.Fatalf("new file: %+v %v", fi, err)
	}
	if _, err := r.WriteFile(fp(t, r, "new/deep/f.txt"), ServerRights, strings.NewReader("two"), WriteOptions{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second write without overwrite: %v", err)
	}
	if _, err := r.WriteFile(fp(t, r, "nodir/f.txt"), ServerRights, strings.NewReader("x"), WriteOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing parent without mkdirs: %v", err)
	}
	// A symlink at the name is replaced; its target outside is untouched.
	if _, err := r.WriteFile(fp(t, r, "link"), ServerRights, strings.NewReader("mine"), WriteOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Fatalf("write through a symlink changed the target: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(ws, "link")); fi.Mode()&os.ModeSymlink != 0 {
		t.Fatal("link still a symlink")
	}
	// A hard link at the name is replaced too, not written through.
	write(t, filepath.Join(ws, "orig"), "orig", 0o644)
	must(t, os.Link(filepath.Join(ws, "orig"), filepath.Join(ws, "hard")))
	if _, err := r.WriteFile(fp(t, r, "hard"), ServerRights, strings.NewReader("new"), WriteOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "orig")); string(b) != "orig" {
		t.Fatalf("write through a hard link: %q", b)
	}
	// Through a directory link out: refused, nothing created outside.
	if _, err := r.WriteFile(fp(t, r, "dirlink/x"), ServerRights, strings.NewReader("x"), WriteOptions{MkdirAll: true}); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("write through a symlinked directory out: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Fatal("file created outside the workspace")
	}
	// Through a directory link inside: followed.
	if fi, err := r.WriteFile(fp(t, r, "subdir/b.txt"), ServerRights, strings.NewReader("b"), WriteOptions{}); err != nil || fi.Path != "sub/b.txt" {
		t.Fatalf("write through a symlinked directory inside: %+v %v", fi, err)
	}
	// A setuid file is replaced by a plain one.
	write(t, filepath.Join(ws, "suid"), "x", 0o755)
	must(t, os.Chmod(filepath.Join(ws, "suid"), 0o4755))
	fi, err = r.WriteFile(fp(t, r, "suid"), ServerRights, strings.NewReader("y"), WriteOptions{Overwrite: true})
	if err != nil || fi.Mode != "0644" {
		t.Fatalf("overwrite setuid: %+v, %v", fi, err)
	}
	if st, _ := os.Stat(filepath.Join(ws, "suid")); st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || st.Mode().Perm() != 0o644 {
		t.Fatalf("mode after overwrite: %v", st.Mode())
	}
	// A directory is not overwritten.
	if _, err := r.WriteFile(fp(t, r, "sub"), ServerRights, strings.NewReader("y"), WriteOptions{Overwrite: true}); !errors.Is(err, ErrIsDir) {
		t.Fatalf("overwrite a directory: %v", err)
	}
	// The upload limit: refused, and no file (temporary or not) is left.
	if _, err := r.WriteFile(fp(t, r, "big"), ServerRights, bytes.NewReader(make([]byte, 11)), WriteOptions{MaxBytes: 10}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(ws, "*big*")); len(left) != 0 {
		t.Fatalf("oversized upload left %v", left)
	}
}

func TestDelete(t *testing.T) {
	r, ws, outside := filesRoot(t)
	write(t, filepath.Join(ws, "gone.txt"), "x", 0o644)
	must(t, r.Delete(fp(t, r, "gone.txt"), ServerRights))
	if _, err := os.Stat(filepath.Join(ws, "gone.txt")); err == nil {
		t.Fatal("file still there")
	}
	if err := r.Delete(fp(t, r, "sub"), ServerRights); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("delete non-empty dir: %v", err)
	}
	if err := r.Delete(fp(t, r, "dirlink/secret"), ServerRights); err == nil {
		t.Fatal("delete through a symlinked dir out succeeded")
	}
	must(t, r.Delete(fp(t, r, "link"), ServerRights)) // the link, not its target
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Fatalf("deleting a link removed its target: %v", err)
	}
	if err := r.Delete(fp(t, r, ""), ServerRights); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("delete the workspace: %v", err)
	}
	if err := r.Delete(fp(t, r, "nope"), ServerRights); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("delete missing: %v", err)
	}
}

func TestList(t *testing.T) {
	r, ws, _ := filesRoot(t)
	r = r.HideTree(filepath.Join(ws, "state"))
	write(t, filepath.Join(ws, "state", "jobs.db"), "x", 0o644)
	all, truncated, err := r.List(fp(t, r, ""), ServerRights, ListOptions{Recursive: true})
	must(t, err)
	var paths []string
	for _, fi := range all {
		paths = append(paths, fi.Path+":"+fi.Type)
	}
	if got, want := strings.Join(paths, " "), "dirlink:symlink inlink:symlink link:symlink sub:dir sub/a.txt:file subdir:symlink"; got != want || truncated {
		t.Fatalf("list = %s (truncated %v), want %s", got, truncated, want)
	}
	some, truncated, err := r.List(fp(t, r, ""), ServerRights, ListOptions{Recursive: true, Pattern: "*.txt", Limit: 5})
	if err != nil || len(some) != 1 || some[0].MIME != "text/plain" || truncated {
		t.Fatalf("pattern list = %+v %v %v", some, truncated, err)
	}
	one, truncated, err := r.List(fp(t, r, ""), ServerRights, ListOptions{Limit: 1})
	if err != nil || len(one) != 1 || !truncated {
		t.Fatalf("limited list = %+v %v %v", one, truncated, err)
	}
	if in, _, err := r.List(fp(t, r, "subdir"), ServerRights, ListOptions{}); err != nil || len(in) != 1 || in[0].Path != "sub/a.txt" {
		t.Fatalf("listing through a symlink inside: %+v %v", in, err)
	}
	if _, _, err := r.List(fp(t, r, "dirlink"), ServerRights, ListOptions{}); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("listing through a symlink out: %v", err)
	}
	if _, _, err := r.List(fp(t, r, ""), ServerRights, ListOptions{Pattern: "["}); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("bad pattern: %v", err)
	}
}

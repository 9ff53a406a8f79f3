package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func kinds(cs []Change) string {
	var b []string
	for _, c := range cs {
		s := c.Path + ":" + c.Kind
		if c.Concurrent {
			s += "*"
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

// TestWatcher: what a run changed, and only that: files in new
// directories, rewrites, deletions, temp files gone again, the state dir
// and byte-code caches left out, and nothing seen while no run was active.
func TestWatcher(t *testing.T) {
	r, ws := newRoot(t)
	r = r.HideTree(filepath.Join(ws, "state"))
	write(t, filepath.Join(ws, "old.txt"), "old", 0o644)
	write(t, filepath.Join(ws, "gone.txt"), "x", 0o644)
	write(t, filepath.Join(ws, "d", "keep.csv"), "a,b\n", 0o644)
	w := NewWatcher(r)
	t.Cleanup(func() { w.Close() })

	s := w.Begin()
	write(t, filepath.Join(ws, "old.txt"), "new", 0o644)
	os.Remove(filepath.Join(ws, "gone.txt"))
	write(t, filepath.Join(ws, "tmp.txt"), "x", 0o644)
	os.Remove(filepath.Join(ws, "tmp.txt"))
	// A new directory tree made and filled at once (before any watch on it).
	write(t, filepath.Join(ws, "out", "deep", "plot.png"), "png", 0o644)
	write(t, filepath.Join(ws, "d", "new.json"), "{}", 0o644)
	write(t, filepath.Join(ws, "__pycache__", "m.cpython-311.pyc"), "x", 0o644)
	write(t, filepath.Join(ws, "state", "jobs.db"), "x", 0o644)
	got, note := s.End(ServerRights)
	if want := "d/new.json:created gone.txt:deleted old.txt:modified out/deep/plot.png:created"; kinds(got) != want || note != "" {
		t.Fatalf("changes = %s (note %q), want %s", kinds(got), note, want)
	}
	for _, c := range got {
		if c.Path == "old.txt" && (c.Size != 3 || c.SHA256 != "11507a0e2f5e69d5dfa40a62a1bd7b6ee57e6bcd85c67c9b8431b36fff21c437" || c.MIME != "text/plain") {
			t.Errorf("old.txt: %+v", c)
		}
	}

	// Between runs: nobody's. The new directory is watched from now on.
	write(t, filepath.Join(ws, "between.txt"), "x", 0o644)
	s = w.Begin()
	write(t, filepath.Join(ws, "out", "deep", "second.png"), "png", 0o644)
	got, _ = s.End(ServerRights)
	if kinds(got) != "out/deep/second.png:created" {
		t.Fatalf("second run: %s", kinds(got))
	}

	// Two runs at once: a change seen while both were active goes to
	// both, marked; one seen while one was alone is that run's.
	a := w.Begin()
	write(t, filepath.Join(ws, "a-alone.txt"), "x", 0o644)
	b := w.Begin()
	write(t, filepath.Join(ws, "both.txt"), "x", 0o644)
	gotA, _ := a.End(ServerRights)
	write(t, filepath.Join(ws, "b-alone.txt"), "x", 0o644)
	gotB, _ := b.End(ServerRights)
	if kinds(gotA) != "a-alone.txt:created both.txt:created*" || kinds(gotB) != "b-alone.txt:created both.txt:created*" {
		t.Fatalf("concurrent runs: a %s, b %s", kinds(gotA), kinds(gotB))
	}
}

// TestWatcherLimits: a run that changes more files than are listed says so.
func TestWatcherLimits(t *testing.T) {
	r, ws := newRoot(t)
	w := NewWatcher(r)
	t.Cleanup(func() { w.Close() })
	s := w.Begin()
	for i := range maxReported + 5 {
		write(t, filepath.Join(ws, fmt.Sprintf("f%03d", i)), "x", 0o644)
	}
	got, note := s.End(ServerRights)
	if len(got) != maxReported || !strings.Contains(note, "5 more changed files") {
		t.Fatalf("%d changes, note %q", len(got), note)
	}
}

// BenchmarkChangedFiles is what the changed-file report adds to a run in a
// workspace of 10,000 files (100 directories of 100): Begin and End around
// a run that writes nothing, and one that writes one file (minus the
// write itself: one-file-written-untracked); walk is the
// full stat of the tree it replaces, for comparison.
func BenchmarkChangedFiles(b *testing.B) {
	r, err := NewRoot(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ws := r.Dir()
	for d := range 100 {
		dir := filepath.Join(ws, fmt.Sprintf("d%03d", d))
		os.Mkdir(dir, 0o755)
		for f := range 100 {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", f)), []byte("x"), 0o644)
		}
	}
	w := NewWatcher(r)
	defer w.Close()
	w.Begin().End(ServerRights) // sets the watches up once
	b.Run("nothing-changed", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s := w.Begin()
			if got, _ := s.End(ServerRights); len(got) != 0 {
				b.Fatal(got)
			}
		}
	})
	b.Run("one-file-written", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s := w.Begin()
			os.WriteFile(filepath.Join(ws, "d050", "out.txt"), []byte("result"), 0o644)
			if got, _ := s.End(ServerRights); len(got) != 1 {
				b.Fatal(got)
			}
		}
	})
	b.Run("one-file-written-untracked", func(b *testing.B) { // the write alone, to subtract
		for i := 0; i < b.N; i++ {
			os.WriteFile(filepath.Join(ws, "d050", "out.txt"), []byte("result"), 0o644)
		}
	})
	b.Run("walk-for-comparison", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			n := 0
			filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if _, err := d.Info(); err == nil {
						n++
					}
				}
				return nil
			})
			if n < 10000 {
				b.Fatal(n)
			}
		}
	})
}

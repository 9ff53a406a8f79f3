package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReadFile compares a race-free read held to the run user's
// rights with a plain os.ReadFile, for a file at the workspace root, three
// directories down, and a missing pyproject.toml (what project detection
// meets on most runs).
func BenchmarkReadFile(b *testing.B) {
	r, err := NewRoot(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ws := r.Dir()
	shallow := filepath.Join(ws, ".env")
	deep := filepath.Join(ws, "a", "b", "c", ".env")
	os.MkdirAll(filepath.Dir(deep), 0o755)
	for _, p := range []string{shallow, deep} {
		os.WriteFile(p, []byte("A=1\n"), 0o644)
	}
	missing := filepath.Join(ws, "pyproject.toml")
	rights := Rights{UID: 65534, GID: 65534, Idmapped: true}
	for _, tt := range []struct {
		name string
		path string
	}{{"root", shallow}, {"depth3", deep}, {"missing", missing}} {
		b.Run(tt.name+"/os.ReadFile", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				os.ReadFile(tt.path)
			}
		})
		b.Run(tt.name+"/Root.ReadFile", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r.ReadFile(tt.path, rights, 1<<20)
			}
		})
	}
}

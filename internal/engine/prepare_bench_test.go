package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkPrepare measures what the server does for a run before starting
// it (validation, path rules, reads of the files it names, interpreter and
// sandbox choice), without starting Python: the part of a warm run's ~3 ms
// the server's own checks cost. Compare before/after a change in the same
// run of the machine.
func BenchmarkPrepare(b *testing.B) {
	ws := b.TempDir()
	os.WriteFile(filepath.Join(ws, "s.py"), []byte("print(1)\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".env"), []byte("A=1\nB=\"two\"\n"), 0o644)
	e, err := New(Config{Workspace: ws, StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for _, tt := range []struct {
		name string
		req  Request
	}{
		{"code", Request{Code: "print(1)"}},
		{"script_path", Request{ScriptPath: "s.py"}},
		{"env_file", Request{Code: "print(1)", EnvFile: ".env"}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				req := tt.req
				p, err := e.prepare(context.Background(), &req, nil, Extras{})
				if err != nil {
					b.Fatal(err)
				}
				p.uv.done()
				e.tmp.remove(p.tmpDir)
			}
		})
	}
}

// BenchmarkReadRights is what every run now pays to know whose rights the
// server's reads on its behalf are held to (a cached run-as choice).
func BenchmarkReadRights(b *testing.B) {
	e, err := New(Config{Workspace: b.TempDir(), StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	req := Request{Code: "print(1)"}
	for i := 0; i < b.N; i++ {
		if _, err := e.readRights(&req, e.cfg.Workspace); err != nil {
			b.Fatal(err)
		}
	}
}

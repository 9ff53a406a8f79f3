package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunReportsChangedFiles: a run, cold or warm and under the default
// sandbox, reports the workspace files it created, modified and deleted,
// with checksums and workspace URIs; the byte-code cache and the files
// nobody's run touched are not listed.
func TestRunReportsChangedFiles(t *testing.T) {
	cold, warm, ws := warmPair(t)
	for _, tc := range []struct {
		name string
		e    *Engine
	}{{"cold", cold}, {"warm", warm}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(ws, tc.name)
			writeFile(t, filepath.Join(dir, "old.txt"), "old\n")
			writeFile(t, filepath.Join(dir, "gone.txt"), "x\n")
			writeFile(t, filepath.Join(dir, "mod.py"), "X = 1\n")
			os.Chmod(dir, 0o777) // whoever the run is, it may write here
			res := run(t, tc.e, Request{Cwd: tc.name, Code: `import os, sys
sys.path.insert(0, ".")
import mod
os.makedirs("out/deep", exist_ok=True)
open("out/deep/data.csv", "w").write("a,b\n1,2\n")
open("old.txt", "w").write("new\n")
os.remove("gone.txt")
open("tmp.txt", "w").write("x"); os.remove("tmp.txt")
print(mod.X)`})
			if res.ExitCode != 0 {
				t.Fatalf("run failed: %s", res.Stderr)
			}
			var got []string
			for _, f := range res.Files {
				got = append(got, f.Path+":"+f.Change)
				if f.Path == tc.name+"/out/deep/data.csv" && (f.Size != 8 || f.MIME != "text/csv" || len(f.SHA256) != 64 || f.URI != "pyexec://workspace/"+tc.name+"/out/deep/data.csv") {
					t.Errorf("data.csv: %+v", f)
				}
			}
			want := tc.name + "/gone.txt:deleted " + tc.name + "/old.txt:modified " + tc.name + "/out/deep/data.csv:created"
			if strings.Join(got, " ") != want || res.FilesNote != "" {
				t.Fatalf("files = %v (note %q), want %s", got, res.FilesNote, want)
			}
		})
	}
}

// TestRunWithoutChangesListsNone: a run that writes nothing reports no
// files (and a later run does not inherit what happened between runs).
func TestRunWithoutChangesListsNone(t *testing.T) {
	e, ws := newTestEngine(t)
	run(t, e, Request{Code: "pass"})
	writeFile(t, filepath.Join(ws, "between.txt"), "x")
	res, err := e.Run(context.Background(), Request{Code: "print(1)"}, nil)
	if err != nil || len(res.Files) != 0 {
		t.Fatalf("files = %+v, %v", res.Files, err)
	}
}

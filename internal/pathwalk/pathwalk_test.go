package pathwalk

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "real/sub"), 0o755))
	must(os.WriteFile(filepath.Join(root, "real/sub/file"), nil, 0o644))
	must(os.Symlink("real", filepath.Join(root, "rel")))                         // relative link
	must(os.Symlink(filepath.Join(root, "rel/sub"), filepath.Join(root, "abs"))) // absolute, through another link
	must(os.Symlink("loop", filepath.Join(root, "loop")))

	tests := []struct {
		name    string
		path    string
		want    string
		links   []Link
		wantErr string
	}{
		{name: "no links", path: root + "/real/sub/file", want: root + "/real/sub/file"},
		{name: "dot and dotdot", path: root + "/real/./sub/../sub/file", want: root + "/real/sub/file"},
		{name: "relative link", path: root + "/rel/sub/file", want: root + "/real/sub/file",
			links: []Link{{root + "/rel", "real"}}},
		{name: "absolute link through a link", path: root + "/abs/file", want: root + "/real/sub/file",
			links: []Link{{root + "/abs", root + "/rel/sub"}, {root + "/rel", "real"}}},
		{name: "missing", path: root + "/nope/file", wantErr: "no such file"},
		{name: "loop", path: root + "/loop/x", wantErr: "too many symlinks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, links, err := Resolve(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve(%q) error = %v, want it to say %q", tt.path, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || !reflect.DeepEqual(links, tt.links) {
				t.Errorf("Resolve(%q) = %q, %v; want %q, %v", tt.path, got, links, tt.want, tt.links)
			}
		})
	}
}

package engine

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// richCells defines objects with rich reprs (no packages needed: the PNG
// is made with zlib).
const richCells = `import struct, zlib
def png(w, h):
    def chunk(t, d):
        return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress((b'\x00' + b'\x80' * (w * 3)) * h)) + chunk(b'IEND', b''))
class Pic:
    def __init__(self, w, h): self.w, self.h = w, h
    def _repr_png_(self): return png(self.w, self.h)
    def __repr__(self): return 'Pic(%d, %d)' % (self.w, self.h)
class Table:
    def _repr_html_(self): return '<table><tr><td>1</td></tr></table>'
    def _repr_markdown_(self): return '| a |\n|---|\n| 1 |'
    def __repr__(self): return 'Table()'
class Bundle:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {'text/plain': 'B', 'application/json': {'k': [1, 2]}, 'image/svg+xml': '<svg/>'}
`

// A cell's displays, in order, and its last expression's rich form; the
// next cell starts with none; plain values stay plain; the files a cell
// writes are reported; limits behind an exception are named. Cold and warm.
func TestSessionCellOutputs(t *testing.T) {
	for _, mode := range []string{"cold", "warm"} {
		t.Run(mode, func(t *testing.T) {
			e, ws := newTestEngine(t, func(c *Config) {
				if mode == "warm" {
					c.Warm = WarmConfig{Spares: 1, wait: true}
				}
			})
			sp := startSession(t, e, Request{})
			if r := cell(t, sp, 1, richCells); r.Error != nil || len(r.Display) != 0 {
				t.Fatalf("definitions: %+v", r)
			}
			r := cell(t, sp, 2, "display(Pic(4, 3))\nprint('between')\ndisplay(Table(), 'plain')\nPic(8, 6)")
			if len(r.Display) != 4 {
				t.Fatalf("displays %+v", r.Display)
			}
			first, table, plain, result := r.Display[0], r.Display[1], r.Display[2], r.Display[3]
			raw, _ := base64.StdEncoding.DecodeString(first.Data["image/png"])
			if first.Width != 4 || first.Height != 3 || !strings.HasPrefix(string(raw), "\x89PNG") || first.Source != "display" {
				t.Errorf("first display %+v", first)
			}
			if table.Data["text/html"] == "" || table.Data["text/markdown"] == "" || table.Data["text/plain"] != "Table()" {
				t.Errorf("table %+v", table.Data)
			}
			if plain.Data["text/plain"] != "'plain'" {
				t.Errorf("plain %+v", plain.Data)
			}
			if result.Source != "result" || result.Width != 8 || result.Data["text/plain"] != "Pic(8, 6)" || r.Result == nil || *r.Result != "Pic(8, 6)" {
				t.Errorf("result %+v / %v", result, r.Result)
			}
			if r.Stdout != "between\n" {
				t.Errorf("stdout %q", r.Stdout)
			}
			r = cell(t, sp, 3, "Bundle()")
			if len(r.Display) != 1 || r.Display[0].Data["application/json"] != `{"k": [1, 2]}` || r.Display[0].Data["image/svg+xml"] != "<svg/>" {
				t.Errorf("mimebundle %+v", r.Display)
			}
			r = cell(t, sp, 4, "x = [1, 2]\nx")
			if len(r.Display) != 0 || *r.Result != "[1, 2]" {
				t.Errorf("a list is a plain result: %+v", r)
			}
			if _, err := os.Stat(sessionCellDir(sp.prep.tmpDir, 3)); !os.IsNotExist(err) {
				t.Errorf("cell 3's records are still there: %v", err)
			}
			r = cell(t, sp, 5, "open('made.txt', 'w').write('hi')\nimport os\nos.makedirs('sub', exist_ok=True)\nopen('sub/b.csv', 'w').write('a,b')")
			if len(r.Files) != 2 || r.Files[0].Path != "made.txt" || r.Files[0].Change != "created" || r.Files[1].Path != "sub/b.csv" || r.Files[0].Concurrent {
				t.Errorf("files %+v (%s)", r.Files, r.FilesNote)
			}
			if _, err := os.Stat(filepath.Join(ws, "made.txt")); err != nil {
				t.Fatal(err)
			}
			if r = cell(t, sp, 6, "x"); len(r.Files) != 0 {
				t.Errorf("cell 6 reports files %+v", r.Files)
			}
			if r = cell(t, sp, 7, "import os\nos.fork = None\nraise BlockingIOError(11, 'Resource temporarily unavailable')"); r.LimitExceeded != sandbox.LimitProcesses {
				t.Errorf("limit %q for %+v", r.LimitExceeded, r.Error)
			}
			if r.Sandbox == "" {
				t.Errorf("no sandbox summary")
			}
		})
	}
}

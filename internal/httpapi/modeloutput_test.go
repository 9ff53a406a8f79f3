package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/mcpserver"
)

// modelSessions serves one workspace cold and warm, in process, through a
// remote execution server and over MCP's HTTP transport: what a model
// sees must be the same everywhere. With sharedState the servers share one
// state dir (as pyexec processes may), so that an environment is built
// once for all of them.
func modelSessions(t *testing.T, sharedState bool) (fixture, map[string]*mcp.ClientSession) {
	t.Helper()
	f := newFixture(t)
	if err := os.MkdirAll(filepath.Join(f.workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.workspace, "sub", "fails.py"), []byte("def f():\n    raise ValueError('bad value')\nf()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	warm := func(c *engine.Config) { c.Warm = engine.WarmConfig{Spares: 1} }
	cold := withJobs(t, f.local(t, nil))
	f2, f3 := f, f
	if !sharedState {
		f2.stateDir, f3.stateDir = t.TempDir(), t.TempDir()
	}
	hot := withJobs(t, f2.local(t, warm))
	ts, _ := serve(t, withJobs(t, f3.local(t, warm)), func(o *httpapi.Options) { o.Token = "tok"; o.SyncBudget = time.Minute })
	// A generous buffer: the first info call lists interpreters, slow on a
	// loaded machine.
	remote, err := httpapi.NewClient(ts.URL, httpapi.ClientOptions{Token: "tok", TimeoutBuffer: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: bearer{"tok", http.DefaultTransport}}
	overHTTP, err := newClient(nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { overHTTP.Close() })
	// pyexec mcp as a subprocess, over stdio, as an MCP client starts it.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stdioState := f.stateDir
	if !sharedState {
		stdioState = t.TempDir()
	}
	cmd := exec.Command(exe, "mcp", "--workspace", f.workspace, "--state-dir", stdioState, "--sync-budget", "60", "--log-level", "error")
	cmd.Env = append(os.Environ(), "PYEXEC_TEST_AS_CLI=1")
	overStdio, err := newClient(nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { overStdio.Close() })
	in := func(ex executor.Executor) *mcp.ClientSession {
		srv := mcpserver.New(ex, mcpserver.Options{Version: testVersion, SyncBudget: time.Minute})
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		cs, err := newClient(nil).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	return f, map[string]*mcp.ClientSession{
		"cold":   in(cold),
		"warm":   in(hot),
		"remote": in(remote),
		"http":   overHTTP,
		"stdio":  overStdio,
	}
}

func callModel(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, map[string]any, int) {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(r)
	var s map[string]any
	b, _ := json.Marshal(r.StructuredContent)
	json.Unmarshal(b, &s)
	return r, s, len(raw)
}

// TestModelSeesBudgetedOutput: a script printing 5 MB comes back within
// ~100 KB of JSON (about 25,000 tokens), its last line visible, and its full
// output readable through the job the result links to.
func TestModelSeesBudgetedOutput(t *testing.T) {
	_, sessions := modelSessions(t, false)
	code := "import sys\nfor i in range(50000):\n    print('line %06d ' % i + 'x' * 90)\nprint('THE LAST LINE', file=sys.stderr)\nprint('END OF STDOUT')\n"
	for name, cs := range sessions {
		t.Run(name, func(t *testing.T) {
			r, s, size := callModel(t, cs, "run_python", map[string]any{"code": code})
			wantOK(t, r)
			tx := text(r)
			t.Logf("%s: result %d bytes of JSON, text %d chars", name, size, len(tx))
			if size > 100_000 {
				t.Errorf("result is %d bytes of JSON, want <= 100000", size)
			}
			for _, want := range []string{"END OF STDOUT", "THE LAST LINE", "line 000000", "cut here", "job://"} {
				if !strings.Contains(tx, want) {
					t.Errorf("text lacks %q", want)
				}
			}
			if !strings.HasSuffix(strings.TrimSpace(s["stdout"].(string)), "END OF STDOUT") {
				t.Errorf("structured stdout does not end with the last line")
			}
			uri, _ := s["output_uri"].(string)
			id, _ := s["output_job_id"].(string)
			if uri != "job://"+id+"/output" || id == "" {
				t.Fatalf("output_uri %q, output_job_id %q", uri, id)
			}
			linked := false
			for _, c := range r.Content {
				if l, ok := c.(*mcp.ResourceLink); ok && l.URI == uri {
					linked = true
				}
			}
			if !linked {
				t.Error("no resource_link to the full output")
			}
			// The whole stdout, by offsets.
			var got int64
			off := int64(0)
			for i := 0; i < 100; i++ {
				_, g, _ := callModel(t, cs, "get_job", map[string]any{"job_id": id, "stdout_offset": off, "stderr_offset": 0, "max_bytes": 1 << 20, "markdown_output": false})
				got += int64(len(g["stdout"].(string)))
				off = int64(g["next_stdout_offset"].(float64))
				if g["output_done"] == true {
					break
				}
			}
			if want := int64(s["stdout_bytes"].(float64)); got != want {
				t.Fatalf("read %d bytes of stdout through the job, want %d", got, want)
			}
			rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
			if err != nil || !strings.HasPrefix(rr.Contents[0].Text, "---STDOUT---\nline 000000") {
				t.Fatalf("read %s: %v", uri, err)
			}
		})
	}
}

// TestModelSeesErrorsItCanActOn: tracebacks name <code> and workspace
// paths, the error is structured, and known fixes come as hints.
func TestModelSeesErrorsItCanActOn(t *testing.T) {
	f, sessions := modelSessions(t, false)
	cases := []struct {
		name  string
		args  map[string]any
		check func(t *testing.T, tx string, s map[string]any)
	}{
		{"inline traceback", map[string]any{"code": "def f():\n    return 1/0\nf()\n"}, func(t *testing.T, tx string, s map[string]any) {
			e, _ := s["error"].(map[string]any)
			if e == nil || e["ename"] != "ZeroDivisionError" || !strings.Contains(s["stderr"].(string), `File "<code>", line 2, in f`) {
				t.Fatalf("error %v stderr %q", e, s["stderr"])
			}
			if strings.Contains(tx, f.stateDir) || strings.Contains(tx, "/code/") {
				t.Fatalf("text names the state dir: %s", tx)
			}
		}},
		{"script traceback", map[string]any{"script_path": "sub/fails.py"}, func(t *testing.T, tx string, s map[string]any) {
			if !strings.Contains(s["stderr"].(string), `File "sub/fails.py", line 2, in f`) || !strings.Contains(tx, "**error**: ValueError: bad value") {
				t.Fatalf("text %s", tx)
			}
		}},
		{"missing module", map[string]any{"code": "import sklearn\n"}, func(t *testing.T, tx string, s map[string]any) {
			if h, _ := s["hint"].(string); !strings.Contains(h, `dependencies: ["scikit-learn"]`) {
				t.Fatalf("hint %q", h)
			}
		}},
		{"network denied", map[string]any{"code": "import socket\nsocket.getaddrinfo('example.com', 80)\n", "network": "deny"}, func(t *testing.T, tx string, s map[string]any) {
			if h, _ := s["hint"].(string); !strings.Contains(h, "network is denied") {
				t.Fatalf("hint %q stderr %q", h, s["stderr"])
			}
		}},
		{"pip inside a run", map[string]any{"code": "import subprocess\n# pip install requests\nprint('Successfully installed requests-2.0')\n"}, func(t *testing.T, tx string, s map[string]any) {
			if h, _ := s["hint"].(string); !strings.Contains(h, "dependencies") {
				t.Fatalf("hint %q", h)
			}
		}},
		{"display", map[string]any{"code": "class M:\n    def _repr_markdown_(self):\n        return '**rich** text'\ndisplay(M(), {'a': 1})\n"}, func(t *testing.T, tx string, s map[string]any) {
			d, _ := s["display"].([]any)
			if len(d) != 2 || !strings.Contains(tx, "**rich** text") || !strings.Contains(tx, "{'a': 1}") {
				t.Fatalf("display %v text %s", d, tx)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for name, cs := range sessions {
				t.Run(name, func(t *testing.T) {
					r, s, _ := callModel(t, cs, "run_python", tc.args)
					wantOK(t, r)
					tc.check(t, text(r), s)
				})
			}
		})
	}
}

// TestModelSeesPlotsAndTables: real matplotlib, pandas and Pillow, from the
// package registry through uv: figures come back as PNG images sized for a
// model, DataFrames as capped markdown tables.
func TestModelSeesPlotsAndTables(t *testing.T) {
	if testing.Short() {
		t.Skip("installs matplotlib, pandas and pillow with uv")
	}
	f, sessions := modelSessions(t, true)
	deps := []string{"matplotlib", "pandas", "pillow"}
	code := `import matplotlib.pyplot as plt
import pandas as pd
from PIL import Image
fig = plt.figure(figsize=(40, 30), dpi=100)   # 4000x3000 px as drawn
plt.plot(range(100), [i * i for i in range(100)])
plt.title("squares")
plt.show()
plt.figure(figsize=(6.4, 4.8))
plt.bar(["a", "b"], [1, 2])                    # left open: captured at exit
df = pd.DataFrame({"x": range(100), "y": [i * 2 for i in range(100)]})
display(df)
display(Image.new("RGB", (64, 32), "red"))
print("done")
`
	for name, cs := range sessions {
		t.Run(name, func(t *testing.T) {
			// Build the environment first (minutes on a cold uv cache):
			// as a job, so that no call waits past the sync budget.
			_, j, _ := callModel(t, cs, "run_python", map[string]any{"code": "import matplotlib, pandas, PIL", "dependencies": deps, "mode": "async"})
			for i := 0; i < 10; i++ {
				_, g, _ := callModel(t, cs, "get_job", map[string]any{"job_id": j["job_id"], "wait": 60})
				if g["status"] != "pending" && g["status"] != "running" {
					break
				}
			}
			r, s, size := callModel(t, cs, "run_python", map[string]any{"code": code, "dependencies": deps, "timeout": 300})
			wantOK(t, r)
			tx := text(r)
			if s["success"] != true {
				t.Fatalf("run failed: %s", tx)
			}
			// The environment's font list, built once when it was made, is
			// what matplotlib found: it scanned no fonts in this run.
			if strings.Contains(s["stderr"].(string), "building the font cache") {
				t.Errorf("matplotlib rebuilt its font cache in the run: %s", s["stderr"])
			}
			var images []*mcp.ImageContent
			for _, c := range r.Content {
				if im, ok := c.(*mcp.ImageContent); ok {
					images = append(images, im)
				}
			}
			info, _ := s["images"].([]any)
			t.Logf("%s: %d images, result %d bytes; images %v", name, len(images), size, info)
			if len(images) != 3 || len(info) != 3 {
				t.Fatalf("images: %d inline, %d described; text %s", len(images), len(info), tx)
			}
			for i, it := range info {
				m := it.(map[string]any)
				w, h, n := m["width"].(float64), m["height"].(float64), m["bytes"].(float64)
				if max(w, h) > 1568 || n > 1<<20 || images[i].MIMEType != "image/png" || len(images[i].Data) != int(n) {
					t.Errorf("image %d: %vx%v, %v bytes, %s", i, w, h, n, images[i].MIMEType)
				}
			}
			if first := info[0].(map[string]any); first["width"].(float64) < 1500 {
				t.Errorf("the 4000x3000 figure came back at %v px wide; want the largest that fits 1568", first["width"])
			}
			for _, want := range []string{" | x | y |\n|---|---|---|", "DataFrame: 100 rows × 2 columns (showing 20 rows, 2 columns)", "squares"} {
				if !strings.Contains(tx, want) {
					t.Errorf("text lacks %q:\n%s", want, tx)
				}
			}
			if name == "cold" || name == "warm" {
				checkDrawnFigures(t, cs, f.workspace, deps)
			}
		})
	}
}

// checkDrawnFigures: a figure the script already drew (here by saving it)
// is captured from what it drew, pixel for pixel the file it saved; one
// changed after saving is drawn again, so the capture shows the change.
func checkDrawnFigures(t *testing.T, cs *mcp.ClientSession, workspace string, deps []string) {
	t.Helper()
	code := `import matplotlib.pyplot as plt
plt.figure(figsize=(3, 2), dpi=100); plt.plot([1, 2, 3]); plt.savefig("drawn_same.png")
plt.figure(figsize=(3, 2), dpi=100); plt.plot([1, 2, 3]); plt.savefig("drawn_changed.png"); plt.plot([3, 2, 1])
`
	r, s, _ := callModel(t, cs, "run_python", map[string]any{"code": code, "dependencies": deps, "timeout": 300})
	wantOK(t, r)
	if s["success"] != true {
		t.Fatalf("run failed: %s", text(r))
	}
	var captured []image.Image
	for _, c := range r.Content {
		if im, ok := c.(*mcp.ImageContent); ok {
			img, err := png.Decode(bytes.NewReader(im.Data))
			if err != nil {
				t.Fatalf("captured image: %v", err)
			}
			captured = append(captured, img)
		}
	}
	if len(captured) != 2 {
		t.Fatalf("%d images captured, want 2: %s", len(captured), text(r))
	}
	for i, tc := range []struct {
		file string
		same bool
	}{{"drawn_same.png", true}, {"drawn_changed.png", false}} {
		raw, err := os.ReadFile(filepath.Join(workspace, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		saved, err := png.Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if got := samePixels(saved, captured[i]); got != tc.same {
			t.Errorf("capture %d against %s: same pixels = %v, want %v", i, tc.file, got, tc.same)
		}
	}
}

func samePixels(a, b image.Image) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	for y := a.Bounds().Min.Y; y < a.Bounds().Max.Y; y++ {
		for x := a.Bounds().Min.X; x < a.Bounds().Max.X; x++ {
			r1, g1, b1, a1 := a.At(x, y).RGBA()
			r2, g2, b2, a2 := b.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 || a1 != a2 {
				return false
			}
		}
	}
	return true
}

// TestModelSeesImagesBeyondInline: images a result cannot carry inline (one
// over 1 MB, a ninth) come back as resource links to the kept job, readable
// through every transport; no imaging library needed (PNGs made with zlib).
func TestModelSeesImagesBeyondInline(t *testing.T) {
	_, sessions := modelSessions(t, false)
	code := pngCells + `display(Img(640, 640, 1))
for i in range(9):
    display(Img(8, 8))
`
	for name, cs := range sessions {
		t.Run(name, func(t *testing.T) {
			r, s, size := callModel(t, cs, "run_python", map[string]any{"code": code})
			wantOK(t, r)
			id, _ := s["output_job_id"].(string)
			if id == "" {
				t.Fatalf("not kept: %s", text(r))
			}
			images, links := 0, map[string]bool{}
			for _, c := range r.Content {
				switch c := c.(type) {
				case *mcp.ImageContent:
					images++
				case *mcp.ResourceLink:
					links[c.URI] = true
				}
			}
			big := "job://" + id + "/artifacts/display-1.png"
			if images != 8 || !links[big] || !links["job://"+id+"/artifacts/display-10.png"] || size > 100_000 {
				t.Fatalf("%d inline, links %v, %d bytes: %s", images, links, size, text(r))
			}
			rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: big})
			if err != nil || rr.Contents[0].MIMEType != "image/png" || len(rr.Contents[0].Blob) <= 1<<20 {
				t.Fatalf("read %s: %v", big, err)
			}
		})
	}
}

package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/httpapi"
)

func images(r *mcp.CallToolResult) []*mcp.ImageContent {
	var out []*mcp.ImageContent
	for _, c := range r.Content {
		if im, ok := c.(*mcp.ImageContent); ok {
			out = append(out, im)
		}
	}
	return out
}

func sources(s map[string]any) []string {
	var out []string
	ds, _ := s["display"].([]any)
	for _, d := range ds {
		src, _ := d.(map[string]any)["source"].(string)
		out = append(out, src)
	}
	return out
}

// TestModelSeesPlotsInSessions: real matplotlib, pandas and Pillow (from
// the package registry through uv, as TestModelSeesPlotsAndTables gets
// them) in session cells, over every transport: plt.show(), display() of a
// PIL image, a DataFrame as the cell's value and a figure left open come
// back as images and tables; figures are closed after the cell; a missing
// module gets a session hint; the history keeps the images and the
// exported notebook has them, as the real nbformat package reads it.
func TestModelSeesPlotsInSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("installs matplotlib, pandas, pillow and nbformat with uv")
	}
	_, sessions := modelSessions(t, true)
	deps := []string{"matplotlib", "pandas", "pillow"}
	for name, cs := range sessions {
		t.Run(name, func(t *testing.T) {
			// The environment first (minutes on a cold uv cache), as a job.
			_, j, _ := callModel(t, cs, "run_python", map[string]any{"code": "import matplotlib, pandas, PIL", "dependencies": deps, "mode": "async"})
			for i := 0; i < 10; i++ {
				_, g, _ := callModel(t, cs, "get_job", map[string]any{"job_id": j["job_id"], "wait": 60})
				if g["status"] != "pending" && g["status"] != "running" {
					break
				}
			}
			sess := "plots-" + name
			cell := func(code string, extra map[string]any) (*mcp.CallToolResult, map[string]any) {
				t.Helper()
				args := map[string]any{"session": sess, "code": code, "timeout": 300}
				for k, v := range extra {
					args[k] = v
				}
				r, s, _ := callModel(t, cs, "run_python", args)
				wantOK(t, r)
				return r, s
			}
			cell("import matplotlib.pyplot as plt\nimport pandas as pd\nfrom PIL import Image\ndf = pd.DataFrame({'x': range(30), 'y': [i * i for i in range(30)]})", map[string]any{"dependencies": deps})
			r, s := cell("plt.plot([1, 3, 2])\nplt.title('shown')\nplt.show()\ndisplay(Image.new('RGB', (40, 20), 'blue'))\nplt.figure()\nplt.bar(['a', 'b'], [1, 2])\nprint('drawn')\ndf", nil)
			tx := text(r)
			if got := strings.Join(sources(s), ","); got != "figure,display,result,figure" {
				t.Fatalf("display sources %q; text:\n%s", got, tx)
			}
			ims, info := images(r), s["images"].([]any)
			if len(ims) != 3 || len(info) != 3 {
				t.Fatalf("%d images inline, %d described:\n%s", len(ims), len(info), tx)
			}
			for i, im := range ims {
				if im.MIMEType != "image/png" || !strings.HasPrefix(string(im.Data), "\x89PNG") {
					t.Errorf("image %d: %s", i, im.MIMEType)
				}
			}
			res := s["display"].([]any)[2].(map[string]any)["data"].(map[string]any)
			if !strings.Contains(res["text/html"].(string), "dataframe") || !strings.Contains(res["text/markdown"].(string), "| x | y |") || s["result"] == nil {
				t.Errorf("DataFrame result %v", res)
			}
			for _, want := range []string{"the cell displayed 4 output(s), 3 image(s) (3 inline in this result)", "DataFrame: 30 rows × 2 columns", "result: Out[2], shown in rich form as display 3", "drawn"} {
				if !strings.Contains(tx, want) {
					t.Errorf("text lacks %q:\n%s", want, tx)
				}
			}
			if len(tx) > 8000 {
				t.Errorf("the text a model reads is %d characters", len(tx))
			}
			if _, s = cell("plt.get_fignums()", nil); s["result"] != "[]" || len(sources(s)) != 0 {
				t.Errorf("figures after the cell: %v", s)
			}
			_, s = cell("import sklearn", nil)
			if h, _ := s["hint"].(string); !strings.Contains(h, `dependencies: ["scikit-learn"]`) || !strings.Contains(h, "session="+`"`+sess+`"`) {
				t.Errorf("hint %q", s["hint"])
			}

			ctx := context.Background()
			hist, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "session://" + sess + "/history"})
			if err != nil {
				t.Fatal(err)
			}
			var h struct {
				Cells []struct {
					Display []engine.Display `json:"display"`
				} `json:"cells"`
			}
			if err := json.Unmarshal([]byte(hist.Contents[0].Text), &h); err != nil || len(h.Cells) != 4 || len(h.Cells[1].Display) != 4 {
				t.Fatalf("history: %v %s", err, hist.Contents[0].Text[:min(len(hist.Contents[0].Text), 500)])
			}
			if png, _ := base64.StdEncoding.DecodeString(h.Cells[1].Display[0].Data["image/png"]); !strings.HasPrefix(string(png), "\x89PNG") {
				t.Errorf("the history lost the figure")
			}
			path := "nb/" + sess + ".ipynb"
			if r, _, _ := callModel(t, cs, "session_export", map[string]any{"session": sess, "path": path}); r.IsError {
				t.Fatalf("export: %s", text(r))
			}
			check := "import base64, json, nbformat\nnb = nbformat.read('" + path + "', as_version=4)\nnbformat.validate(nb)\n" +
				"c = nb.cells[1]\npng = base64.b64decode(c.outputs[1]['data']['image/png'])\n" +
				"print(json.dumps([[o['output_type'] for o in c.outputs], png[:4] == b'\\x89PNG', 'text/html' in c.outputs[3]['data'], c.outputs[3]['execution_count']]))"
			r, s, _ = callModel(t, cs, "run_python", map[string]any{"code": check, "dependencies": []string{"nbformat"}, "timeout": 300})
			want := `[["stream", "display_data", "display_data", "execute_result", "display_data"], true, true, 2]` + "\n"
			if s["stdout"] != want {
				t.Fatalf("nbformat says %v\n%s", s["stdout"], text(r))
			}
			callModel(t, cs, "session_close", map[string]any{"session": sess})
		})
	}
}

// pngCells makes PNGs with zlib (no imaging library): Img(w, h, noise).
const pngCells = `import os, struct, zlib
def png(w, h, noise):
    def chunk(t, d):
        return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    row = b'\x00' + (os.urandom(w * 3) if noise else b'\x80' * (w * 3))
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress(row * h, 0 if noise else 6)) + chunk(b'IEND', b''))
class Img:
    def __init__(self, w, h, noise=0): self.a = (w, h, noise)
    def _repr_png_(self): return png(*self.a)
`

// TestSessionImagesBeyondInline: a cell's images past the inline limits (one
// over 1 MB, a ninth) are kept with the cell's job and linked, readable
// through every transport, as a run's are; the files a cell writes are
// listed with links.
func TestSessionImagesBeyondInline(t *testing.T) {
	_, sessions := modelSessions(t, false)
	for name, cs := range sessions {
		t.Run(name, func(t *testing.T) {
			sess := "imgs-" + name
			r, s, size := callModel(t, cs, "run_python", map[string]any{"session": sess, "code": pngCells + "display(Img(640, 640, 1))\nfor i in range(9):\n    display(Img(8, 8))\nopen('made-" + name + ".txt', 'w').write('x')\n"})
			wantOK(t, r)
			id, _ := s["output_job_id"].(string)
			if id == "" {
				t.Fatalf("not kept: %s", text(r))
			}
			links := map[string]bool{}
			for _, c := range r.Content {
				if l, ok := c.(*mcp.ResourceLink); ok {
					links[l.URI] = true
				}
			}
			big := "job://" + id + "/artifacts/display-1.png"
			if len(images(r)) != 8 || !links[big] || !links["job://"+id+"/artifacts/display-10.png"] || size > 100_000 {
				t.Fatalf("%d inline, links %v, %d bytes: %s", len(images(r)), links, size, text(r))
			}
			if !links["pyexec://workspace/made-"+name+".txt"] || !strings.Contains(text(r), "made-"+name+".txt` created") {
				t.Errorf("files: %v %s", s["files"], text(r))
			}
			rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: big})
			if err != nil || rr.Contents[0].MIMEType != "image/png" || len(rr.Contents[0].Blob) <= 1<<20 {
				t.Fatalf("read %s: %v", big, err)
			}
			// A trivial cell leaves no job behind.
			if _, s, _ = callModel(t, cs, "run_python", map[string]any{"session": sess, "code": "1 + 1"}); s["result"] != "2" || s["output_job_id"] != nil {
				t.Errorf("trivial cell: %v", s)
			}
			callModel(t, cs, "session_close", map[string]any{"session": sess})
		})
	}
}

// TestSessionCellJobTimeout: a job-backed cell (every cell of a server with
// jobs) is limited like a run_python job, by the job timeout, not by the
// default timeout of runs that are waited for; an explicit shorter timeout
// still applies. Local and remote.
func TestSessionCellJobTimeout(t *testing.T) {
	for _, e := range localAndRemote(t, func(c *engine.Config) { c.DefaultTimeout = time.Second }) {
		t.Run(e.name, func(t *testing.T) {
			sess := "jt-" + e.name
			_, s, _ := callModel(t, e.cs, "run_python", map[string]any{"session": sess, "code": "import time\ntime.sleep(1.5)\n'slept'"})
			if s["result"] != "'slept'" || s["timed_out"] == true {
				t.Fatalf("a 1.5 s cell under a 1 s default timeout: %v", s)
			}
			_, s, _ = callModel(t, e.cs, "run_python", map[string]any{"session": sess, "code": "import time\ntime.sleep(5)", "timeout": 0.5})
			if s["timed_out"] != true || s["session_status"] != "idle" {
				t.Fatalf("explicit timeout: %v", s)
			}
		})
	}
}

type namedClient struct {
	name string
	cs   *mcp.ClientSession
}

// localAndRemote connects an MCP client to an in-process executor with
// jobs and one to a remote execution server (httpapi.Client), both on one
// workspace, the engines configured by mutate.
func localAndRemote(t *testing.T, mutate func(*engine.Config)) []namedClient {
	t.Helper()
	f := newFixture(t)
	ts, _ := serve(t, withJobs(t, f.local(t, mutate)), func(o *httpapi.Options) { o.Token = "tok" })
	remote, err := httpapi.NewClient(ts.URL, httpapi.ClientOptions{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	var lp, rp atomic.Int64
	return []namedClient{{"local", connectInMemory(t, withJobs(t, f.local(t, mutate)), &lp)}, {"remote", connectInMemory(t, remote, &rp)}}
}

// Over REST a cell's result carries its displays as MIME bundles (images
// base64) and the files it changed; the history keeps them.
func TestSessionRichREST(t *testing.T) {
	f := newFixture(t)
	ts, _ := serve(t, f.local(t, nil), nil)
	r := do(t, "POST", ts.URL+"/v1/sessions/rich/run", map[string]any{"code": pngCells + "display(Img(4, 3))\nopen('rest.txt', 'w').write('x')\nImg(2, 2)"})
	var cell struct {
		Display []engine.Display    `json:"display"`
		Files   []engine.FileChange `json:"files"`
		Result  string              `json:"result"`
	}
	r.json(t, &cell)
	if len(cell.Display) != 2 || cell.Display[0].Width != 4 || cell.Display[1].Source != "result" || len(cell.Files) != 1 || cell.Files[0].Path != "rest.txt" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	png, _ := base64.StdEncoding.DecodeString(cell.Display[0].Data["image/png"])
	if !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("image %q", cell.Display[0].Data["image/png"])
	}
	r = do(t, "GET", ts.URL+"/v1/sessions/rich/history", nil)
	if !strings.Contains(string(r.body), `"image/png"`) || !strings.Contains(string(r.body), `"rest.txt"`) {
		t.Fatalf("history %s", r.body)
	}
}

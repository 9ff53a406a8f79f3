package mcpserver

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pngCode defines png(w, h): a valid PNG of w x h pixels made with zlib,
// and Img, whose _repr_png_ returns one (no imaging library needed).
const pngCode = `import struct, zlib
def png(w, h, noise=0):
    import os
    def chunk(t, d):
        c = struct.pack('>I', len(d)) + t + d
        return c + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    row = b'\x00' + (os.urandom(w * 3) if noise else b'\x80' * (w * 3))
    raw = row * h
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress(raw, 0 if noise else 6)) + chunk(b'IEND', b''))
class Img:
    def __init__(self, w, h, noise=0): self.w, self.h, self.noise = w, h, noise
    def _repr_png_(self): return png(self.w, self.h, self.noise)
`

// TestDisplaysKeptWithTheJob: what a run displayed survives a handoff to a
// job (kept as artifacts, linked from get_job, readable as resources), and
// images a sync result cannot carry inline are linked, not only noted.
func TestDisplaysKeptWithTheJob(t *testing.T) {
	h := newJobHarness(t, 300*time.Millisecond)
	ctx := context.Background()

	t.Run("handoff", func(t *testing.T) {
		code := pngCode + "import time\ntime.sleep(1)\ndisplay(Img(40, 30))\nprint('drawn')\n"
		res := h.call(t, ctx, "run_python", map[string]any{"code": code}, nil)
		hand := decode[map[string]any](t, res)
		id, _ := hand["job_id"].(string)
		if id == "" {
			t.Fatalf("not handed off: %s", text(res))
		}
		var last *mcp.CallToolResult
		off := int64(0)
		for i := 0; i < 20; i++ {
			last = h.call(t, ctx, "get_job", map[string]any{"job_id": id, "wait": 30, "stdout_offset": off}, nil)
			out := decode[GetJobOutput](t, last)
			if out.Status.Terminal() {
				break
			}
			off = out.NextStdoutOffset
		}
		tx := text(last)
		uri := "job://" + id + "/artifacts/display-1.png"
		if !strings.Contains(tx, "[image: 40x30 image/png") || !strings.Contains(tx, uri) {
			t.Fatalf("get_job text lacks the image:\n%s", tx)
		}
		var link *mcp.ResourceLink
		for _, c := range last.Content {
			if l, ok := c.(*mcp.ResourceLink); ok && l.URI == uri {
				link = l
			}
		}
		if link == nil || link.MIMEType != "image/png" {
			t.Fatalf("no resource_link to %s in %v", uri, last.Content)
		}
		rr, err := h.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatal(err)
		}
		if c := rr.Contents[0]; c.MIMEType != "image/png" || !bytes.HasPrefix(c.Blob, []byte("\x89PNG")) || int64(len(c.Blob)) != *link.Size {
			t.Fatalf("read %s: %s, %d bytes (link says %d)", uri, c.MIMEType, len(c.Blob), *link.Size)
		}
		if _, err := h.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "job://" + id + "/artifacts/display-9.png"}); err == nil {
			t.Fatal("an artifact that does not exist was read")
		}
	})

	t.Run("over budget", func(t *testing.T) {
		// A budget no loaded machine misses: this run must end in the call.
		h := newJobHarness(t, 5*time.Minute)
		// A 1.2 MB image (noise does not compress) and nine small ones:
		// the big one and the ninth small one cannot go inline.
		code := pngCode + "display(Img(640, 640, noise=1))\nfor i in range(9):\n    display(Img(8, 8))\n"
		res := h.call(t, ctx, "run_python", map[string]any{"code": code}, nil)
		out := decode[map[string]any](t, res)
		id, _ := out["output_job_id"].(string)
		if id == "" {
			t.Fatalf("the run was not kept: %s", text(res))
		}
		images, links := 0, map[string]*mcp.ResourceLink{}
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.ImageContent:
				images++
			case *mcp.ResourceLink:
				links[c.URI] = c
			}
		}
		big, ninth := "job://"+id+"/artifacts/display-1.png", "job://"+id+"/artifacts/display-10.png"
		if images != 8 || links[big] == nil || links[ninth] == nil {
			t.Fatalf("%d images inline, links %v; text:\n%s", images, links, text(res))
		}
		if !strings.Contains(text(res), "kept with the job: "+big) {
			t.Errorf("text does not say where the big image is:\n%s", text(res))
		}
		rr, err := h.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: big})
		if err != nil || len(rr.Contents[0].Blob) <= 1<<20 {
			t.Fatalf("read %s: %v", big, err)
		}
	})
}

package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/testutil/mcptest"
)

func tinyPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestFilesTools: write_file, read_file, list_files and the workspace
// resources through a real client, with the errors a model gets.
func TestFilesTools(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "link"))
	cs, _ := connectWithStore(t, testServer{workspace: ws, toolsets: "core,files"})
	ctx := context.Background()

	out, text, isErr := mcptest.Call(t, cs, "write_file", map[string]any{"path": "data/in.csv", "content": "a,b\n1,2\n"})
	if isErr || out["size"] != float64(8) || out["mime"] != "text/csv" || !strings.Contains(text, "data/in.csv") {
		t.Fatalf("write_file: %v %q", out, text)
	}
	// A run sees it.
	out, _, _ = mcptest.Call(t, cs, "run_python", map[string]any{"code": "print(open('data/in.csv').read().split()[1])"})
	if out["stdout"] != "1,2\n" {
		t.Fatalf("the run did not see the file: %v", out)
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"exists", map[string]any{"path": "data/in.csv", "content": "x"}, "already exists (pass overwrite"},
		{"outside", map[string]any{"path": "../x", "content": "x"}, "outside the workspace"},
		{"bad encoding", map[string]any{"path": "x", "content": "x", "encoding": "latin1"}, "encoding:"},
		{"bad base64", map[string]any{"path": "x", "content": "@@", "encoding": "base64"}, "content: not valid base64"},
	} {
		if _, text, isErr := mcptest.Call(t, cs, "write_file", tc.args); !isErr || !strings.Contains(text, tc.want) {
			t.Errorf("write_file %s: %q, want an error with %q", tc.name, text, tc.want)
		}
	}
	// Overwrite replaces the symlink, not its target.
	if _, text, isErr := mcptest.Call(t, cs, "write_file", map[string]any{"path": "link", "content": "mine", "overwrite": true}); isErr {
		t.Fatal(text)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Fatalf("wrote through a symlink: %q", b)
	}

	// Binary round trip, and a read in pieces.
	bin := []byte{0, 1, 2, 0xff, 0xfe, 'x'}
	if _, text, isErr := mcptest.Call(t, cs, "write_file", map[string]any{"path": "b.bin", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"}); isErr {
		t.Fatal(text)
	}
	out, _, _ = mcptest.Call(t, cs, "read_file", map[string]any{"path": "b.bin"})
	if got, _ := base64.StdEncoding.DecodeString(out["content"].(string)); out["encoding"] != "base64" || !bytes.Equal(got, bin) || out["eof"] != true {
		t.Fatalf("read_file binary: %v", out)
	}
	out, text, _ = mcptest.Call(t, cs, "read_file", map[string]any{"path": "data/in.csv", "offset": 2, "length": 3})
	if out["content"] != "b\n1" || out["next_offset"] != float64(5) || out["eof"] != false || !strings.Contains(text, "offset=5") {
		t.Fatalf("read_file piece: %v %q", out, text)
	}
	if _, text, isErr := mcptest.Call(t, cs, "read_file", map[string]any{"path": "nope.txt"}); !isErr || !strings.Contains(text, "does not exist") {
		t.Errorf("read_file missing: %q", text)
	}

	// An image comes back as an image.
	pic := tinyPNG(t)
	os.WriteFile(filepath.Join(ws, "plot.png"), pic, 0o644)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "plot.png"}})
	if err != nil || res.IsError || len(res.Content) != 2 {
		t.Fatalf("read_file image: %+v %v", res, err)
	}
	if img, ok := res.Content[1].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" || !bytes.Equal(img.Data, pic) {
		t.Fatalf("image content: %+v", res.Content[1])
	}

	out, text, _ = mcptest.Call(t, cs, "list_files", map[string]any{"recursive": true, "pattern": "*.csv"})
	if entries, _ := out["entries"].([]any); len(entries) != 1 || !strings.Contains(text, "data/in.csv") {
		t.Fatalf("list_files: %v %q", out, text)
	}

	// Resources: text and blob.
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "pyexec://workspace/data/in.csv"})
	if err != nil || rr.Contents[0].Text != "a,b\n1,2\n" || rr.Contents[0].MIMEType != "text/csv" {
		t.Fatalf("resource text: %+v %v", rr, err)
	}
	rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "pyexec://workspace/plot.png"})
	if err != nil || !bytes.Equal(rr.Contents[0].Blob, pic) {
		t.Fatalf("resource blob: %+v %v", rr, err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "pyexec://workspace/../etc/passwd"}); err == nil {
		t.Fatal("resource outside the workspace was read")
	}
}

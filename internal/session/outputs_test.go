package session

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
)

func image(n int) engine.Display {
	return engine.Display{Source: "figure", Width: 4, Height: 3, Bytes: n,
		Data: map[string]string{"image/png": base64.StdEncoding.EncodeToString(make([]byte, n)), "text/plain": "<Figure>"}}
}

// The history keeps a cell's displays within its bounds and says what it
// dropped: displays past the per-cell count, long text forms, and the
// oldest cells' images once the session's images pass their total.
func TestHistoryBounds(t *testing.T) {
	many := make([]engine.Display, historyDisplays+3)
	for i := range many {
		many[i] = engine.Display{Data: map[string]string{"text/plain": "x"}}
	}
	long := engine.Display{Data: map[string]string{"text/html": strings.Repeat("h", historyDisplayText+10), "text/plain": "t"}}
	for _, tc := range []struct {
		name      string
		in        []engine.Display
		displays  int
		note      string
		htmlBytes int
	}{
		{"few", []engine.Display{image(10)}, 1, "", 0},
		{"too many", many, historyDisplays, "3 of the cell's 35 displays were dropped", 0},
		{"long text", []engine.Display{long}, 1, "text forms of displays over", historyDisplayText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := historyCell(1, "x", engine.CellResult{Display: tc.in})
			if len(h.Display) != tc.displays || !strings.Contains(h.OutputsNote, tc.note) || tc.note == "" && h.OutputsNote != "" {
				t.Fatalf("%d displays, note %q", len(h.Display), h.OutputsNote)
			}
			if tc.htmlBytes > 0 && !strings.HasPrefix(h.Display[0].Data["text/html"], strings.Repeat("h", tc.htmlBytes)) || tc.htmlBytes > 0 && len(h.Display[0].Data["text/html"]) > tc.htmlBytes+100 {
				t.Fatalf("html %d bytes", len(h.Display[0].Data["text/html"]))
			}
		})
	}
	// 40 cells of one 1 MiB image each: the oldest lose theirs.
	var cells []HistoryCell
	for i := 1; i <= 40; i++ {
		cells = append(cells, historyCell(i, "plot()", engine.CellResult{Display: []engine.Display{image(1 << 20)}}))
		trimHistoryImages(cells)
	}
	kept := 0
	for _, c := range cells {
		if _, ok := c.Display[0].Data["image/png"]; ok {
			kept++
		} else if !strings.Contains(c.OutputsNote, "images dropped from the history") || c.Display[0].Data["text/plain"] != "<Figure>" {
			t.Fatalf("cell %d: %+v", c.ExecutionCount, c)
		}
	}
	if kept != historyImageBytes>>20 || cells[len(cells)-1].OutputsNote != "" {
		t.Fatalf("%d images kept", kept)
	}
}

// The notebook writes displays as display_data, the value's rich form as
// execute_result, JSON as an object and image sizes in the metadata.
func TestNotebookOutputs(t *testing.T) {
	res := "Pic()"
	h := History{Session: "nb", Cells: []HistoryCell{{ExecutionCount: 1, Code: "show()", Stdout: "hi\n", Result: &res, Display: []engine.Display{
		image(8),
		{Source: "display", Data: map[string]string{"application/json": `{"a": 1}`, "text/plain": "J"}},
		{Source: "result", Data: map[string]string{"text/html": "<b>x</b>", "text/plain": "Pic()"}},
	}}}}
	b, err := Notebook(h, "3.11")
	if err != nil {
		t.Fatal(err)
	}
	var nb struct {
		Cells []struct {
			Outputs []map[string]any `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b, &nb); err != nil {
		t.Fatal(err)
	}
	outs := nb.Cells[0].Outputs
	var kinds []string
	for _, o := range outs {
		kinds = append(kinds, o["output_type"].(string))
	}
	if strings.Join(kinds, ",") != "stream,display_data,display_data,execute_result" {
		t.Fatalf("outputs %v", kinds)
	}
	if m := outs[1]["metadata"].(map[string]any)["image/png"].(map[string]any); m["width"] != 4.0 {
		t.Errorf("image metadata %v", m)
	}
	if j, ok := outs[2]["data"].(map[string]any)["application/json"].(map[string]any); !ok || j["a"] != 1.0 {
		t.Errorf("json %v", outs[2]["data"])
	}
	if outs[3]["execution_count"] != 1.0 || outs[3]["data"].(map[string]any)["text/html"] == nil {
		t.Errorf("execute_result %v", outs[3])
	}
}

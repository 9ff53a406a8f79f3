package session

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// What the history keeps of a cell's rich outputs. A cell's displays go
// into the history (for session://NAME/history and the notebook export)
// within these bounds; what is dropped is said in the cell's
// outputs_note, never silently.
const (
	historyDisplays    = 32       // displays kept per cell
	historyDisplayText = 64 << 10 // characters per text form of a display
	historyImageBytes  = 32 << 20 // decoded image bytes kept across a session's whole history
)

// imageMIMEs are the binary (base64) forms of a bundle.
var imageMIMEs = []string{"image/png", "image/jpeg", "image/gif"}

// historyCell is cell n as the history keeps it.
func historyCell(n int, code string, c engine.CellResult) HistoryCell {
	h := HistoryCell{ExecutionCount: n, Code: code, Stdout: cut(c.Stdout), Stderr: cut(c.Stderr), Result: c.Result, Error: c.Error,
		StartedAt: time.Now().Add(-time.Duration(c.ElapsedSeconds * float64(time.Second))).UTC(), ElapsedSeconds: c.ElapsedSeconds, Files: c.Files}
	var notes []string
	ds := c.Display
	if len(ds) > historyDisplays {
		notes = append(notes, fmt.Sprintf("%d of the cell's %d displays were dropped (the history keeps %d per cell)", len(ds)-historyDisplays, len(ds), historyDisplays))
		ds = ds[:historyDisplays]
	}
	clipped := false
	for _, d := range ds {
		nd := d
		nd.Data = make(map[string]string, len(d.Data))
		for mime, v := range d.Data {
			if !isImage(mime) && len(v) > historyDisplayText {
				v, clipped = clipText(v, historyDisplayText), true
			}
			nd.Data[mime] = v
		}
		h.Display = append(h.Display, nd)
	}
	if clipped {
		notes = append(notes, fmt.Sprintf("text forms of displays over %d characters were cut", historyDisplayText))
	}
	h.OutputsNote = strings.Join(notes, "; ")
	return h
}

// trimHistoryImages keeps the images of a session's history within
// historyImageBytes: the oldest cells' images go first, each replaced by
// a note saying so (their text forms stay).
func trimHistoryImages(cells []HistoryCell) {
	total := 0
	for i := range cells {
		for _, d := range cells[i].Display {
			total += imageBytes(d)
		}
	}
	for i := 0; i < len(cells) && total > historyImageBytes; i++ {
		dropped := 0
		for j := range cells[i].Display {
			d := &cells[i].Display[j]
			if n := imageBytes(*d); n > 0 {
				data := make(map[string]string, len(d.Data))
				for mime, v := range d.Data {
					if !isImage(mime) {
						data[mime] = v
					}
				}
				if data["text/plain"] == "" {
					data["text/plain"] = "[image not kept]"
				}
				d.Data, d.Bytes = data, 0
				total -= n
				dropped++
			}
		}
		if dropped > 0 {
			note := fmt.Sprintf("%d images dropped from the history to keep it within %d MiB of images (newer cells keep theirs)", dropped, historyImageBytes>>20)
			cells[i].OutputsNote = strings.TrimPrefix(cells[i].OutputsNote+"; "+note, "; ")
		}
	}
}

func imageBytes(d engine.Display) int {
	n := 0
	for _, mime := range imageMIMEs {
		if v, ok := d.Data[mime]; ok {
			n += base64.StdEncoding.DecodedLen(len(v)) - (len(v) - len(strings.TrimRight(v, "=")))
		}
	}
	return n
}

func isImage(mime string) bool {
	for _, m := range imageMIMEs {
		if m == mime {
			return true
		}
	}
	return false
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + fmt.Sprintf("\n[... %d characters cut]", len(s)-n)
}

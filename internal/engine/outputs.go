package engine

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pyexec/pyexec/internal/workspace"
)

// RunOutputs is what a run showed besides its streams: the uncaught
// exception, what it displayed (display(), rich reprs, matplotlib figures)
// and the workspace files it created or changed.
type RunOutputs struct {
	Error   *RunError    `json:"error,omitempty" jsonschema:"The uncaught exception the run died of, when it died of one."`
	Display []Display    `json:"display,omitempty" jsonschema:"What the run displayed (display(), IPython.display, matplotlib figures), in order, as MIME bundles."`
	Files   []FileChange `json:"files,omitempty" jsonschema:"Workspace files the run created or changed (see files_note for what the list may miss)."`
	// FilesNote says why the file list may be incomplete, when it may be.
	FilesNote string `json:"files_note,omitempty" jsonschema:"Why files may be incomplete (too many changes, workspace not watched)."`
	// OutputNotes are problems reading what the run displayed.
	OutputNotes []string `json:"output_notes,omitempty" jsonschema:"What pyexec could not collect of the run's displays (over a cap, unreadable)."`
}

// RunError is an uncaught exception, as Jupyter's error output names it.
type RunError struct {
	EName     string   `json:"ename" jsonschema:"Exception class, e.g. ModuleNotFoundError."`
	EValue    string   `json:"evalue" jsonschema:"The exception's message."`
	Traceback []string `json:"traceback" jsonschema:"Traceback lines; inline code is <code>, workspace scripts are named by their workspace-relative path."`
	// Module is the missing module of a ModuleNotFoundError.
	Module string `json:"module,omitempty" jsonschema:"For ModuleNotFoundError: the module that could not be imported."`
}

// Display is one displayed object as a MIME bundle. Text types hold text;
// binary types (image/png, image/jpeg) hold base64, as in Jupyter.
type Display struct {
	Data   map[string]string `json:"data" jsonschema:"MIME type -> content (base64 for binary types)."`
	Width  int               `json:"width,omitempty" jsonschema:"Pixel width of the image, when the bundle has one."`
	Height int               `json:"height,omitempty" jsonschema:"Pixel height of the image, when the bundle has one."`
	Source string            `json:"source,omitempty" jsonschema:"display (display() or IPython.display) or figure (a matplotlib figure)."`
	// Bytes is the decoded size of the bundle's image.
	Bytes int `json:"bytes,omitempty" jsonschema:"Size of the image in bytes."`
	// Note is what the run's side said about this display (an image too
	// large to fit the size bounds).
	Note string `json:"note,omitempty" jsonschema:"A remark from the capture, such as an image that could not be made small enough."`
}

// FileChange is a workspace file a run created or changed.
type FileChange struct {
	Path   string `json:"path" jsonschema:"Path relative to the workspace."`
	Size   int64  `json:"size" jsonschema:"Size in bytes."`
	MIME   string `json:"mime" jsonschema:"Media type guessed from the name."`
	SHA256 string `json:"sha256,omitempty" jsonschema:"SHA-256 of the content (absent for files over 64 MiB)."`
	URI    string `json:"uri" jsonschema:"pyexec://workspace/PATH: read it with resources/read or read_file."`
	Change string `json:"change" jsonschema:"created, modified or deleted."`
	// Concurrent: see workspace.Change.
	Concurrent bool `json:"concurrent,omitempty" jsonschema:"True when another run was active in the same workspace when the change was seen: it may be that run's."`
}

// fileChanges are the watcher's changes as a result reports them.
func fileChanges(cs []workspace.Change) []FileChange {
	if len(cs) == 0 {
		return nil
	}
	out := make([]FileChange, len(cs))
	for i, c := range cs {
		out[i] = FileChange{Path: c.Path, Size: c.Size, MIME: c.MIME, SHA256: c.SHA256, URI: workspace.URI(c.Path), Change: c.Kind, Concurrent: c.Concurrent}
	}
	return out
}

// Bounds of what is collected from a run's output dir.
const (
	outputDirName     = ".pyexec-out" // inside the run's temp dir
	maxEventsBytes    = 8 << 20
	maxDisplays       = 64
	maxDisplayFile    = 16 << 20
	maxDisplayedBytes = 64 << 20
)

// outputDir is where the run's Python side (pyexec_rt) writes what it
// displayed: a directory inside its private temp dir.
func outputDir(tmpDir string) string { return filepath.Join(tmpDir, outputDirName) }

// collectOutputs reads what the run left in its output dir. The run wrote
// it, so it is untrusted: it is opened beneath the dir without following
// links, with the rights of whoever the run executed as (the owner of its
// temp dir: what it could read, it could have printed anyway), bounded in
// size, and only decoded as JSON and base64.
func collectOutputs(tmpDir string) RunOutputs {
	return collectOutputsIn(outputDir(tmpDir), tmpRights(tmpDir))
}

// collectOutputsIn reads the records in dir (a run's output dir, or one
// session cell's) with rights.
func collectOutputsIn(dir string, rights workspace.Rights) RunOutputs {
	var out RunOutputs
	f, err := workspace.OpenBeneath(dir, "events.jsonl", rights)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			out.OutputNotes = append(out.OutputNotes, "display records unreadable: "+err.Error())
		}
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxEventsBytes))
	sc.Buffer(make([]byte, 64<<10), maxEventsBytes)
	total := 0
	for sc.Scan() {
		var ev struct {
			Kind   string            `json:"kind"`
			EName  string            `json:"ename"`
			EValue string            `json:"evalue"`
			TB     []string          `json:"traceback"`
			Module string            `json:"module"`
			Data   map[string]string `json:"data"`
			Files  map[string]string `json:"files"`
			Source string            `json:"source"`
			Note   string            `json:"note"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch ev.Kind {
		case "error":
			out.Error = &RunError{EName: ev.EName, EValue: ev.EValue, Traceback: ev.TB, Module: ev.Module}
		case "display":
			if len(out.Display) >= maxDisplays {
				out.OutputNotes = append(out.OutputNotes, "more than 64 displays: the rest were dropped")
				return out
			}
			d := Display{Data: map[string]string{}, Source: ev.Source, Note: ev.Note}
			for mime, text := range ev.Data {
				d.Data[mime] = text
			}
			for mime, name := range ev.Files {
				if strings.Contains(name, "/") {
					continue
				}
				b, err := readBeneath(dir, name, rights, maxDisplayFile)
				if err != nil || total+len(b) > maxDisplayedBytes {
					out.OutputNotes = append(out.OutputNotes, "an image was too large or unreadable and was dropped")
					continue
				}
				total += len(b)
				d.Data[mime] = base64.StdEncoding.EncodeToString(b)
				d.Bytes = len(b)
				if mime == "image/png" {
					d.Width, d.Height = pngSize(b)
				}
			}
			if len(d.Data) > 0 {
				out.Display = append(out.Display, d)
			}
		}
	}
	return out
}

// pngSize reads the dimensions from a PNG's IHDR chunk.
func pngSize(b []byte) (int, int) {
	if len(b) < 24 || !bytes.Equal(b[:8], []byte("\x89PNG\r\n\x1a\n")) || string(b[12:16]) != "IHDR" {
		return 0, 0
	}
	return int(binary.BigEndian.Uint32(b[16:20])), int(binary.BigEndian.Uint32(b[20:24]))
}

// readBeneath reads dir/name as OpenBeneath opens it, at most limit bytes.
func readBeneath(dir, name string, rights workspace.Rights, limit int64) ([]byte, error) {
	f, err := workspace.OpenBeneath(dir, name, rights)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	return b, err
}

package present

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/jobs"
)

// RunInput is one finished run to present.
type RunInput struct {
	Result  engine.Result
	Where   Where  // where its full output is kept
	Heading string // for batch entries
	Code    string // the inline code, when there was some (for hints)
	Budget  int    // characters; 0: DefaultBudget
}

// View is a presented run: the markdown to read, the structured result
// (a copy whose streams and displays fit the same budget: never a second
// full copy) and the extra fields, images and links to attach.
type View struct {
	Markdown string
	Result   engine.Result
	Extra    Extra
	Images   []Image
	Links    []Link
}

// Extra are the presentation's own fields of a structured result.
type Extra struct {
	OutputCut bool        `json:"output_cut,omitempty" jsonschema:"True when stdout or stderr was cut to fit the result budget (a marker in the text says where and how much)."`
	OutputURI string      `json:"output_uri,omitempty" jsonschema:"Where the full output is kept when it was cut: job://ID/output (read it with resources/read, or with get_job and byte offsets)."`
	Images    []ImageInfo `json:"images,omitempty" jsonschema:"Images the run displayed (matplotlib figures, display() of images), in order."`
	Hint      string      `json:"hint,omitempty" jsonschema:"What to change when the fix for the failure is known."`
}

// ImageInfo describes one image of a result.
type ImageInfo struct {
	MIME   string `json:"mime" jsonschema:"image/png or image/jpeg."`
	Width  int    `json:"width,omitempty" jsonschema:"Pixels."`
	Height int    `json:"height,omitempty" jsonschema:"Pixels."`
	Bytes  int    `json:"bytes" jsonschema:"Size of the encoded image."`
	Inline bool   `json:"inline" jsonschema:"True when the image is in the result's content; false when it was over the inline limits (8 images, 1 MB each)."`
	Note   string `json:"note,omitempty" jsonschema:"Why it is not inline, or what the capture said about it."`
	URI    string `json:"uri,omitempty" jsonschema:"job://ID/artifacts/NAME when the image is not inline and its job keeps it: read it with resources/read."`
}

// Image is an image to send inline.
type Image struct {
	MIME string
	Data []byte
}

// Link is a resource to point at.
type Link struct {
	URI, Name, Title, MIME, Description string
	Size                                int64
}

// Run presents one run.
func Run(in RunInput) View {
	budget := in.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	r := in.Result
	v := View{Result: r}
	var b strings.Builder
	if in.Heading != "" {
		fmt.Fprintf(&b, "### %s\n", in.Heading)
	}
	b.WriteString(outcomeLine(r))
	if r.Error != nil {
		fmt.Fprintf(&b, "**error**: %s: %s\n", r.Error.EName, firstLine(r.Error.EValue, 300))
	}
	if h := Hint(r, in.Code); h != "" {
		v.Extra.Hint = h
		fmt.Fprintf(&b, "**hint**: %s\n", h)
	}
	if r.LimitExceeded != "" {
		fmt.Fprintf(&b, "**limit exceeded: %s**\n", r.LimitExceeded)
	}
	for _, n := range r.SandboxNotes {
		fmt.Fprintf(&b, "sandbox: %s\n", n)
	}
	if len(r.ResolvedDependencies) > 0 {
		fmt.Fprintf(&b, "dependencies: %s\n", strings.Join(r.ResolvedDependencies, ", "))
	}

	// Displays take up to a fifth of the budget, the streams the rest.
	displays, dispText := presentDisplays(r.Display, budget/5, in.Where, &v)
	streams := max(streamBudget(budget)-len(dispText), budget/2)
	needs := []int{len(r.Stdout), len(r.Stderr)}
	got := share(needs, streams)
	out := cutStream("stdout", r.Stdout, r.StdoutBytes, r.StdoutLines, got[0], in.Where)
	errs := cutStream("stderr", r.Stderr, r.StderrBytes, r.StderrLines, got[1], in.Where)
	v.Result.Stdout, v.Result.Stderr = out.Text, errs.Text
	v.Result.Display = displays
	if out.Cut || errs.Cut {
		v.Extra.OutputCut = true
		if in.Where.JobID != "" {
			v.Extra.OutputURI = "job://" + in.Where.JobID + "/output"
			v.Links = append(v.Links, Link{URI: v.Extra.OutputURI, Name: "output", Title: "Full output of job " + in.Where.JobID,
				MIME: "text/plain", Size: r.StdoutBytes + r.StderrBytes,
				Description: "The run's complete stdout and stderr (up to the job log cap)."})
		}
	}
	if r.Error != nil {
		e := *r.Error
		e.Traceback = clipLines(e.Traceback, 30, budget/10)
		v.Result.Error = &e
	}
	writeStream(&b, out, r.Stdout != "" || r.StdoutBytes > 0)
	writeStream(&b, errs, r.Stderr != "" || r.StderrBytes > 0)
	b.WriteString(dispText)
	writeFiles(&b, r.Files, r.FilesNote, &v)
	v.Result.Files = clipFiles(r.Files)
	v.Markdown = b.String()
	return v
}

func outcomeLine(r engine.Result) string {
	outcome := "success"
	switch {
	case r.TimedOut:
		outcome = "timed out"
	case !r.Success:
		outcome = "failed"
	}
	return fmt.Sprintf("**%s** · exit code %d · %.3f s · %s · Python %s\n", outcome, r.ExitCode, r.ElapsedSeconds, r.ExecutionStrategy, r.PythonVersionUsed)
}

func firstLine(s string, limit int) string {
	s, _, _ = strings.Cut(s, "\n")
	s, _ = clip(s, limit)
	return s
}

// writeStream renders one stream in a fence the output cannot break. The
// heading counts what the script wrote; pyexec's own notes ([TIMEOUT],
// [LIMIT]) are said to be pyexec's.
func writeStream(b *strings.Builder, s Stream, present bool) {
	if !present {
		return
	}
	head := fmt.Sprintf("%s (%s bytes", s.Name, Commas(s.Bytes))
	if s.Bytes == 0 {
		head = s.Name + " (nothing from the script; pyexec's note"
	}
	if s.Cut {
		head += ", middle cut"
	}
	fmt.Fprintf(b, "\n%s):\n", head)
	WriteFenced(b, s.Text)
}

// WriteFenced writes text in a backtick fence longer than any run of
// backticks inside it.
func WriteFenced(b *strings.Builder, text string) {
	fence := FenceFor(text)
	fmt.Fprintf(b, "%s\n%s", fence, text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(b, "%s\n", fence)
}

// FenceFor returns a backtick fence longer than any run of backticks in s.
func FenceFor(s string) string {
	longest, run := 0, 0
	for _, c := range s {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

func clipLines(lines []string, n, chars int) []string {
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[... %d traceback lines not shown]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	total := 0
	out := make([]string, 0, len(lines))
	for i := len(lines) - 1; i >= 0; i-- {
		total += len(lines[i]) + 1
		if total > chars && len(out) > 0 {
			break
		}
		out = append(out, lines[i])
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// textMIMEs are the text forms of a bundle, best first for a model.
var textMIMEs = []string{"text/markdown", "text/plain", "text/latex", "application/json", "text/html", "image/svg+xml"}

// presentDisplays trims the bundles to budget characters (the best text
// form of each in the markdown; the text forms in structured content) and
// picks the images to send inline.
func presentDisplays(ds []engine.Display, budget int, where Where, v *View) ([]engine.Display, string) {
	if len(ds) == 0 {
		return nil, ""
	}
	var b strings.Builder
	b.WriteString("\ndisplayed:\n")
	needs := make([]int, len(ds))
	for i, d := range ds {
		needs[i] = len(bestText(d))
	}
	got := share(needs, budget)
	out := make([]engine.Display, len(ds))
	for i, d := range ds {
		nd := engine.Display{Data: map[string]string{}, Width: d.Width, Height: d.Height, Source: d.Source, Bytes: d.Bytes, Note: d.Note}
		img := ""
		for _, mime := range []string{"image/png", "image/jpeg", "image/gif"} {
			data, ok := d.Data[mime]
			if !ok {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				continue
			}
			info := ImageInfo{MIME: mime, Width: d.Width, Height: d.Height, Bytes: len(raw), Note: d.Note}
			n := len(v.Extra.Images) + 1
			switch {
			case len(raw) > MaxImageBytes:
				info.Note = strings.TrimPrefix(info.Note+"; over 1 MB: not sent inline (save it to a file with savefig and read it with read_file)", "; ")
			case len(v.Images) >= MaxInlineImages:
				info.Note = "over the 8 inline images: not sent (save it to a file and read it with read_file)"
			default:
				info.Inline = true
				v.Images = append(v.Images, Image{MIME: mime, Data: raw})
			}
			if !info.Inline && where.JobID != "" {
				// The job keeps it (jobs.Artifact): link it instead.
				name := jobs.ArtifactName(i, mime)
				info.URI = jobs.ArtifactURI(where.JobID, name)
				info.Note = strings.Replace(info.Note, "save it to a file with savefig and read it with read_file", "kept with the job: "+info.URI, 1)
				info.Note = strings.Replace(info.Note, "save it to a file and read it with read_file", "kept with the job: "+info.URI, 1)
				v.Links = append(v.Links, Link{URI: info.URI, Name: name, Title: fmt.Sprintf("Image %d (%dx%d)", n, d.Width, d.Height),
					MIME: mime, Size: int64(len(raw)), Description: "An image the run displayed, not sent inline: " + info.Note})
			}
			v.Extra.Images = append(v.Extra.Images, info)
			ref := fmt.Sprintf("[image %d: %dx%d %s, %s bytes", n, d.Width, d.Height, mime, Commas(int64(len(raw))))
			if info.Inline {
				ref += ", in this result's content]"
			} else {
				ref += ", not inline: " + info.Note + "]"
			}
			nd.Data[mime] = ref
			img = ref
			break
		}
		per := max(got[i], 200)
		for _, mime := range textMIMEs {
			if t, ok := d.Data[mime]; ok {
				nd.Data[mime], _ = clip(t, per)
				per = max(per/4, 200) // further forms get less
			}
		}
		out[i] = nd
		text, _ := clip(bestText(d), max(got[i], 200))
		fmt.Fprintf(&b, "%d. ", i+1)
		if img != "" {
			b.WriteString(img + " ")
		}
		switch {
		case strings.HasPrefix(text, "|"): // a table: its own block
			b.WriteString("\n\n" + text + "\n\n")
		case strings.Contains(text, "\n"):
			b.WriteString("\n")
			WriteFenced(&b, text)
		default:
			b.WriteString(text + "\n")
		}
	}
	return out, b.String()
}

func bestText(d engine.Display) string {
	for _, mime := range textMIMEs[:3] {
		if t, ok := d.Data[mime]; ok {
			return t
		}
	}
	return ""
}

const maxFilesShown = 20

func writeFiles(b *strings.Builder, files []engine.FileChange, note string, v *View) {
	if len(files) == 0 && note == "" {
		return
	}
	b.WriteString("\nfiles:\n")
	for i, f := range files {
		if i == maxFilesShown {
			fmt.Fprintf(b, "- ... and %d more\n", len(files)-maxFilesShown)
			break
		}
		fmt.Fprintf(b, "- `%s` %s (%s bytes, %s) %s\n", f.Path, f.Change, Commas(f.Size), f.MIME, f.URI)
		if f.Change != "deleted" {
			v.Links = append(v.Links, Link{URI: f.URI, Name: f.Path, MIME: f.MIME, Size: f.Size, Description: "Workspace file the run " + f.Change})
		}
	}
	if note != "" {
		fmt.Fprintf(b, "(%s)\n", note)
	}
}

func clipFiles(files []engine.FileChange) []engine.FileChange {
	if len(files) > maxFilesShown {
		return files[:maxFilesShown]
	}
	return files
}

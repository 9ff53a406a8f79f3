package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/present"
	"github.com/pyexec/pyexec/internal/workspace"
)

// The files toolset: write_file, read_file, list_files and the
// pyexec://workspace/{+path} resources. In remote mode the agent shares no
// filesystem with the execution server, so this is how data gets to a run
// and results come back; the executor (Local or httpapi.Client) applies
// the same rules either way (executor.Files).

// WriteFileInput is the input of write_file.
type WriteFileInput struct {
	Path      string `json:"path" jsonschema:"File to write, relative to the workspace (or absolute inside it). Missing directories are created."`
	Content   string `json:"content" jsonschema:"The file's content: text, or base64 with encoding base64."`
	Encoding  string `json:"encoding,omitempty" jsonschema:"utf-8 (default) or base64 (for binary files)."`
	Overwrite bool   `json:"overwrite,omitempty" jsonschema:"Replace the file if it exists (default false: an existing file is an error)."`
	Rendering
}

// ReadFileInput is the input of read_file.
type ReadFileInput struct {
	Path   string `json:"path" jsonschema:"File to read, relative to the workspace (or absolute inside it)."`
	Offset int64  `json:"offset,omitempty" jsonschema:"Byte offset to start at (default 0); pass next_offset of the previous read to continue."`
	Length int64  `json:"length,omitempty" jsonschema:"Bytes to read (default and maximum: what fits this result, about the server's --max-result-chars)."`
	Rendering
}

// ReadFileOutput is a piece of a file.
type ReadFileOutput struct {
	Path       string `json:"path" jsonschema:"The file, relative to the workspace."`
	Size       int64  `json:"size" jsonschema:"Size of the whole file in bytes."`
	MIME       string `json:"mime" jsonschema:"Media type guessed from the name."`
	Offset     int64  `json:"offset" jsonschema:"Byte offset of content in the file."`
	NextOffset int64  `json:"next_offset" jsonschema:"Offset to pass to continue reading."`
	EOF        bool   `json:"eof" jsonschema:"True when content reaches the end of the file."`
	Encoding   string `json:"encoding" jsonschema:"utf-8 (content is the text) or base64 (binary; content is base64), or image (the image is in the result's content as an image, content is empty)."`
	Content    string `json:"content" jsonschema:"The bytes read (see encoding)."`
}

// ListFilesInput is the input of list_files.
type ListFilesInput struct {
	Path      string `json:"path,omitempty" jsonschema:"Directory to list, relative to the workspace (default: the workspace)."`
	Pattern   string `json:"pattern,omitempty" jsonschema:"Shell pattern (*.csv, data_??.json) matched against names, or against paths below path when it has a /."`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"List subdirectories too (symlinks are listed, never followed)."`
	Limit     int    `json:"limit,omitempty" jsonschema:"Most entries (default 200, at most 2000)."`
	Rendering
}

const (
	defaultListLimit = 200
	maxListLimit     = 2000
	// maxResourceBytes bounds a resources/read of a workspace file.
	maxResourceBytes = 4 << 20
)

var errNoFiles = errors.New("this server's executor offers no file access (an execution server older than this front end?)")

func (t *tools) filesExecutor() (executor.Files, error) {
	fx, ok := t.ex.(executor.Files)
	if !ok {
		return nil, errNoFiles
	}
	return fx, nil
}

func (t *tools) registerFiles(srv *mcp.Server) {
	if _, ok := t.ex.(executor.Files); !ok {
		return
	}
	addTool(t, srv, &mcp.Tool{
		Name:  "write_file",
		Title: "Write a workspace file",
		Description: "Write a file into the workspace, where runs read it (data for a script, a module, a config). " +
			"Text as is, binary as base64 (encoding: base64). Creates missing directories; an existing file is replaced only with overwrite: true. " +
			"The file is new each time (mode 0644), owned as the runs' files; a symlink at the path is replaced, never written through.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, t.writeFile)
	addTool(t, srv, &mcp.Tool{
		Name:  "read_file",
		Title: "Read a workspace file",
		Description: "Read a file from the workspace: text as is, binary as base64, a PNG, JPEG, GIF or WebP image up to 1 MB as an image. " +
			"Long files come in pieces: pass next_offset as offset to go on. Files a run wrote are listed in its result with their URIs.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.readFile)
	addTool(t, srv, &mcp.Tool{
		Name:        "list_files",
		Title:       "List workspace files",
		Description: "List a workspace directory (path, type, size, mode, modification time, media type), optionally recursive and filtered by a shell pattern.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.listFiles)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "workspace-file", Title: "Workspace file", URITemplate: workspace.URIPrefix + "{+path}",
		Description: fmt.Sprintf("A file of the workspace (text, or a blob for binary files), up to %d MiB; the same rules as read_file. Runs list the files they wrote with these URIs.", maxResourceBytes>>20),
	}, t.readWorkspaceResource)
}

// fileError names the field and keeps the message the executor gave.
func fileError(field string, err error) error {
	return fmt.Errorf("%s: %w", field, err)
}

func (t *tools) writeFile(ctx context.Context, req *mcp.CallToolRequest, in WriteFileInput) (*mcp.CallToolResult, workspace.FileInfo, error) {
	fx, err := t.filesExecutor()
	if err != nil {
		return nil, workspace.FileInfo{}, err
	}
	var content []byte
	switch strings.ToLower(in.Encoding) {
	case "", "utf-8", "utf8":
		content = []byte(in.Content)
	case "base64":
		if content, err = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(in.Content), "")); err != nil {
			return nil, workspace.FileInfo{}, fmt.Errorf("content: not valid base64 (%v); send text with encoding utf-8, or standard base64", err)
		}
	default:
		return nil, workspace.FileInfo{}, fmt.Errorf("encoding: %q is not utf-8 or base64", in.Encoding)
	}
	fi, err := fx.WriteFile(ctx, executor.WriteFileRequest{Path: in.Path, Overwrite: in.Overwrite}, bytes.NewReader(content))
	if err != nil {
		return nil, workspace.FileInfo{}, fileError("path", err)
	}
	return render(in.Rendering, fi, func() string {
		return fmt.Sprintf("wrote `%s` (%s bytes, %s, sha256 %s); runs see it at that path relative to the workspace\n", fi.Path, present.Commas(fi.Size), fi.MIME, fi.SHA256)
	}), fi, nil
}

// imageMIMEs are the formats read_file returns as images.
var imageMIMEs = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

func (t *tools) readFile(ctx context.Context, req *mcp.CallToolRequest, in ReadFileInput) (*mcp.CallToolResult, ReadFileOutput, error) {
	fx, err := t.filesExecutor()
	if err != nil {
		return nil, ReadFileOutput{}, err
	}
	budget, _ := t.budget(OutputBudget{})
	limit := int64(max(t.resultCap, budget))
	length := in.Length
	switch {
	case in.Offset < 0:
		return nil, ReadFileOutput{}, fmt.Errorf("offset: must be >= 0, got %d", in.Offset)
	case length < 0:
		return nil, ReadFileOutput{}, fmt.Errorf("length: must be >= 0, got %d", length)
	case length > limit:
		return nil, ReadFileOutput{}, fmt.Errorf("length: %d is more than a result may carry (%d bytes); read in pieces with offset", length, limit)
	case length == 0:
		length = int64(budget)
	}
	// An image comes whole, as an image, when it is small enough.
	want := length
	if in.Offset == 0 && in.Length == 0 {
		want = max(length, present.MaxImageBytes)
	}
	d, err := fx.ReadFile(ctx, executor.ReadFileRequest{Path: in.Path, Offset: in.Offset, Length: want})
	if err != nil {
		return nil, ReadFileOutput{}, fileError("path", err)
	}
	out := ReadFileOutput{Path: d.Info.Path, Size: d.Info.Size, MIME: d.Info.MIME, Offset: d.Offset}
	if imageMIMEs[d.Info.MIME] && d.Offset == 0 && int64(len(d.Data)) == d.Info.Size && d.Info.Size <= present.MaxImageBytes {
		out.Encoding, out.NextOffset, out.EOF = "image", d.Info.Size, true
		res := render(in.Rendering, out, func() string {
			return fmt.Sprintf("`%s`: %s, %s bytes (the image follows)\n", out.Path, out.MIME, present.Commas(out.Size))
		})
		res.Content = append(res.Content, &mcp.ImageContent{MIMEType: out.MIME, Data: d.Data})
		return res, out, nil
	}
	data := d.Data
	if int64(len(data)) > length {
		data = data[:length]
	}
	eof := d.Offset+int64(len(data)) >= d.Info.Size
	if text, ok := textPiece(data, eof); ok {
		out.Encoding, out.Content = "utf-8", text
		data = data[:len(text)]
	} else {
		raw := data[:min(int64(len(data)), length*3/4)] // base64 grows by a third
		out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(raw)
		data = raw
	}
	out.NextOffset = d.Offset + int64(len(data))
	out.EOF = out.NextOffset >= d.Info.Size
	return render(in.Rendering, out, func() string { return renderFilePiece(out) }), out, nil
}

// textPiece returns data as text when it is UTF-8, an incomplete
// character at its end (not at the end of the file) left for the next
// read.
func textPiece(data []byte, eof bool) (string, bool) {
	if utf8.Valid(data) {
		return string(data), true
	}
	if !eof {
		for cut := 1; cut <= utf8.UTFMax-1 && cut < len(data); cut++ {
			if utf8.Valid(data[:len(data)-cut]) {
				return string(data[:len(data)-cut]), true
			}
		}
	}
	return "", false
}

func renderFilePiece(o ReadFileOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` · %s · %s bytes", o.Path, o.MIME, present.Commas(o.Size))
	if o.Offset > 0 || !o.EOF {
		fmt.Fprintf(&b, " · bytes %s-%s", present.Commas(o.Offset), present.Commas(o.NextOffset))
	}
	if o.Encoding == "base64" {
		b.WriteString(" · binary, as base64")
	}
	b.WriteString("\n")
	present.WriteFenced(&b, o.Content)
	if !o.EOF {
		fmt.Fprintf(&b, "%s bytes more: read_file(path=%q, offset=%d)\n", present.Commas(o.Size-o.NextOffset), o.Path, o.NextOffset)
	}
	return b.String()
}

func (t *tools) listFiles(ctx context.Context, req *mcp.CallToolRequest, in ListFilesInput) (*mcp.CallToolResult, executor.FileList, error) {
	fx, err := t.filesExecutor()
	if err != nil {
		return nil, executor.FileList{}, err
	}
	switch {
	case in.Limit < 0 || in.Limit > maxListLimit:
		return nil, executor.FileList{}, fmt.Errorf("limit: must be between 1 and %d, got %d", maxListLimit, in.Limit)
	case in.Limit == 0:
		in.Limit = defaultListLimit
	}
	l, err := fx.ListFiles(ctx, executor.ListFilesRequest{Path: in.Path, Pattern: in.Pattern, Recursive: in.Recursive, Limit: in.Limit})
	if err != nil {
		return nil, executor.FileList{}, fileError("path", err)
	}
	budget, _ := t.budget(OutputBudget{})
	return render(in.Rendering, l, func() string { return renderFileList(l, in, budget) }), l, nil
}

func renderFileList(l executor.FileList, in ListFilesInput, budget int) string {
	var b strings.Builder
	dir := l.Path
	if dir == "" {
		dir = "the workspace"
	} else {
		dir = "`" + dir + "`"
	}
	fmt.Fprintf(&b, "%d entries in %s", len(l.Entries), dir)
	if in.Pattern != "" {
		fmt.Fprintf(&b, " matching `%s`", in.Pattern)
	}
	if l.Truncated {
		fmt.Fprintf(&b, " (limit %d reached: narrow path or pattern, or raise limit)", in.Limit)
	}
	b.WriteString(":\n")
	for i, e := range l.Entries {
		line := fmt.Sprintf("- `%s`", e.Path)
		switch e.Type {
		case "file":
			line += fmt.Sprintf(" %s bytes", present.Commas(e.Size))
		default:
			line += " " + e.Type
		}
		line += " " + e.ModTime.Format("2006-01-02 15:04") + "\n"
		if b.Len()+len(line) > budget {
			fmt.Fprintf(&b, "- ... %d more (all are in structured content)\n", len(l.Entries)-i)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

func (t *tools) readWorkspaceResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	fx, err := t.filesExecutor()
	if err != nil {
		return nil, err
	}
	rel, err := workspace.ParseURI(uri)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	d, err := fx.ReadFile(ctx, executor.ReadFileRequest{Path: rel, Length: maxResourceBytes + 1})
	switch {
	case errors.Is(err, workspace.ErrInvalidPath) || errors.Is(err, fs.ErrNotExist):
		return nil, mcp.ResourceNotFoundError(uri)
	case err != nil:
		return nil, err
	case int64(len(d.Data)) < d.Info.Size:
		return nil, fmt.Errorf("%s is %s bytes, more than a resource read returns (%d MiB): read it in pieces with read_file offset and length", rel, present.Commas(d.Info.Size), maxResourceBytes>>20)
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: d.Info.MIME}
	if text, ok := textPiece(d.Data, true); ok && !imageMIMEs[d.Info.MIME] {
		c.Text = text
	} else {
		c.Blob = d.Data
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/workspace"
)

// Workspace files over REST, for clients that share no filesystem with
// this server (and for pyexec mcp --executor, whose files tools call
// these):
//
//	PUT    /v1/files/{path}[?overwrite=true]  raw body, or multipart/form-data (the first file part) -> workspace.FileInfo
//	GET    /v1/files/{path}                   the bytes (Range requests honoured)
//	DELETE /v1/files/{path}                   -> {"path", "deleted"}
//	GET    /v1/files?dir=D&pattern=P&recursive=true&limit=N -> executor.FileList
//
// The rules and the error messages are the executor's (executor.Files);
// only the status codes are REST's: 400 a path that can never be in the
// workspace, 403 what the run user may not touch, 404 missing, 409 an
// existing file without overwrite (code exists) or a directory (code
// is_directory), 413 past --max-upload.

// Error codes of the files routes (409s).
const (
	CodeExists      = "exists"       // 409: the file exists; pass overwrite
	CodeIsDirectory = "is_directory" // 409: a directory where a file was meant
	CodeChanged     = "changed"      // 409: a symlink appeared on the way meanwhile
)

// fileOpener is what a local executor offers for streaming reads.
type fileOpener interface {
	OpenFile(ctx context.Context, path string) (*os.File, workspace.FileInfo, error)
}

// uploadLimiter says the largest upload the executor accepts.
type uploadLimiter interface{ MaxUpload() int64 }

func (s *Server) fileRoutes(handle func(pattern, name string, o routeOpts, h http.Handler)) {
	handle("/v1/files", "files_list", routeOpts{}, methods{http.MethodGet: s.handleListFiles})
	handle("/v1/files/{path...}", "files", routeOpts{streamed: true}, methods{
		http.MethodGet:    s.handleGetFile,
		http.MethodPut:    s.handlePutFile,
		http.MethodDelete: s.handleDeleteFile,
	})
}

var errNoFileAccess = newAPIError(http.StatusNotImplemented, CodeInternal, "this server's executor offers no file access")

func (s *Server) files() (executor.Files, error) {
	fx, ok := s.opts.Executor.(executor.Files)
	if !ok {
		return nil, errNoFileAccess
	}
	return fx, nil
}

// fileAPIError gives a files error its status; the message stays the
// executor's, so a remote client repeats it word for word.
func fileAPIError(field string, err error) *apiError {
	code, status := CodeInternal, http.StatusInternalServerError
	switch {
	case errors.Is(err, workspace.ErrInvalidPath):
		return &apiError{Status: http.StatusBadRequest, Detail: ErrorDetail{Code: CodeInvalidRequest, Message: err.Error(), Field: field}}
	case errors.Is(err, workspace.ErrTooLarge):
		code, status = CodePayloadTooLarge, http.StatusRequestEntityTooLarge
	case errors.Is(err, fs.ErrNotExist):
		code, status = CodeNotFound, http.StatusNotFound
	case errors.Is(err, fs.ErrPermission):
		code, status = CodeForbidden, http.StatusForbidden
	case errors.Is(err, fs.ErrExist):
		code, status = CodeExists, http.StatusConflict
	case errors.Is(err, workspace.ErrIsDir):
		code, status = CodeIsDirectory, http.StatusConflict
	case errors.Is(err, workspace.ErrChanged):
		code, status = CodeChanged, http.StatusConflict
	default:
		var ae *apiError
		if errors.As(err, &ae) {
			return ae
		}
	}
	return &apiError{Status: status, Detail: ErrorDetail{Code: code, Message: err.Error(), Field: field}}
}

func (s *Server) handlePutFile(w http.ResponseWriter, r *http.Request) {
	fx, err := s.files()
	if err != nil {
		writeError(w, err)
		return
	}
	overwrite, err := boolQuery(r, "overwrite")
	if err != nil {
		writeError(w, err)
		return
	}
	limit := int64(executor.DefaultMaxUpload)
	if l, ok := s.opts.Executor.(uploadLimiter); ok {
		limit = l.MaxUpload()
	}
	if r.ContentLength > limit {
		writeError(w, newAPIError(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "the upload is %d bytes, more than the upload limit of %d bytes (--max-upload)", r.ContentLength, limit))
		return
	}
	body := io.Reader(r.Body)
	if mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "multipart/form-data" {
		part, err := firstFilePart(multipart.NewReader(r.Body, params["boundary"]))
		if err != nil {
			writeError(w, err)
			return
		}
		defer part.Close()
		body = part
	}
	fi, err := fx.WriteFile(r.Context(), executor.WriteFileRequest{Path: r.PathValue("path"), Overwrite: overwrite}, body)
	if err != nil {
		writeError(w, fileAPIError("path", err))
		return
	}
	writeJSON(w, http.StatusOK, fi)
}

// firstFilePart skips form fields up to the first part that is a file.
func firstFilePart(mr *multipart.Reader) (*multipart.Part, error) {
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, newAPIError(http.StatusBadRequest, CodeInvalidRequest, "the multipart body has no file part (send the file as a part with a filename)")
		}
		if err != nil {
			return nil, newAPIError(http.StatusBadRequest, CodeInvalidRequest, "the multipart body is malformed: %v", err)
		}
		if p.FileName() != "" {
			return p, nil
		}
		p.Close()
	}
}

func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request) {
	path := r.PathValue("path")
	if op, ok := s.opts.Executor.(fileOpener); ok {
		f, fi, err := op.OpenFile(r.Context(), path)
		if err != nil {
			writeError(w, fileAPIError("path", err))
			return
		}
		defer f.Close()
		setFileHeaders(w, fi)
		http.ServeContent(w, r, "", fi.ModTime, f)
		return
	}
	fx, err := s.files()
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := fx.ReadFile(r.Context(), executor.ReadFileRequest{Path: path, Length: executor.DefaultMaxUpload})
	if err != nil {
		writeError(w, fileAPIError("path", err))
		return
	}
	setFileHeaders(w, d.Info)
	w.Write(d.Data)
}

// Headers of a file answer beyond the standard ones.
const (
	FilePathHeader = "X-Pyexec-Path" // the file, relative to the workspace (symlinks resolved)
	FileModeHeader = "X-Pyexec-Mode" // its permission bits, octal
)

func setFileHeaders(w http.ResponseWriter, fi workspace.FileInfo) {
	w.Header().Set("Content-Type", fi.MIME)
	w.Header().Set(FilePathHeader, fi.Path)
	w.Header().Set(FileModeHeader, fi.Mode)
	w.Header().Set("Last-Modified", fi.ModTime.UTC().Format(http.TimeFormat))
}

func (s *Server) handleDeleteFile(w http.ResponseWriter, r *http.Request) {
	fx, err := s.files()
	if err != nil {
		writeError(w, err)
		return
	}
	path := r.PathValue("path")
	if err := fx.DeleteFile(r.Context(), path); err != nil {
		writeError(w, fileAPIError("path", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": path, "deleted": true})
}

func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request) {
	fx, err := s.files()
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	recursive, err := boolQuery(r, "recursive")
	if err != nil {
		writeError(w, err)
		return
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			writeError(w, &apiError{Status: http.StatusBadRequest, Detail: ErrorDetail{Code: CodeInvalidRequest, Field: "limit", Message: fmt.Sprintf("limit must be a positive integer, got %q", v)}})
			return
		}
	}
	l, err := fx.ListFiles(r.Context(), executor.ListFilesRequest{Path: q.Get("dir"), Pattern: q.Get("pattern"), Recursive: recursive, Limit: limit})
	if err != nil {
		field := "dir"
		if q.Get("pattern") != "" && strings.Contains(err.Error(), "pattern") {
			field = "pattern"
		}
		writeError(w, fileAPIError(field, err))
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func boolQuery(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &apiError{Status: http.StatusBadRequest, Detail: ErrorDetail{Code: CodeInvalidRequest, Field: name, Message: fmt.Sprintf("%s must be true or false, got %q", name, v)}}
	}
	return b, nil
}

// The admission wrappers keep the files seam, so /mcp's files tools reach
// the executor (file access is not a run: no admission slot).

func (a *admitted) fileExecutor() (executor.Files, error) {
	fx, ok := a.Executor.(executor.Files)
	if !ok {
		return nil, errors.New(errNoFileAccess.Detail.Message)
	}
	return fx, nil
}

// WriteFile implements executor.Files.
func (a *admitted) WriteFile(ctx context.Context, req executor.WriteFileRequest, content io.Reader) (workspace.FileInfo, error) {
	fx, err := a.fileExecutor()
	if err != nil {
		return workspace.FileInfo{}, err
	}
	return fx.WriteFile(ctx, req, content)
}

// ReadFile implements executor.Files.
func (a *admitted) ReadFile(ctx context.Context, req executor.ReadFileRequest) (executor.FileData, error) {
	fx, err := a.fileExecutor()
	if err != nil {
		return executor.FileData{}, err
	}
	return fx.ReadFile(ctx, req)
}

// ListFiles implements executor.Files.
func (a *admitted) ListFiles(ctx context.Context, req executor.ListFilesRequest) (executor.FileList, error) {
	fx, err := a.fileExecutor()
	if err != nil {
		return executor.FileList{}, err
	}
	return fx.ListFiles(ctx, req)
}

// DeleteFile implements executor.Files.
func (a *admitted) DeleteFile(ctx context.Context, path string) error {
	fx, err := a.fileExecutor()
	if err != nil {
		return err
	}
	return fx.DeleteFile(ctx, path)
}

// WriteFile implements executor.Files.
func (x *admittedJobs) WriteFile(ctx context.Context, req executor.WriteFileRequest, content io.Reader) (workspace.FileInfo, error) {
	return x.a.WriteFile(ctx, req, content)
}

// ReadFile implements executor.Files.
func (x *admittedJobs) ReadFile(ctx context.Context, req executor.ReadFileRequest) (executor.FileData, error) {
	return x.a.ReadFile(ctx, req)
}

// ListFiles implements executor.Files.
func (x *admittedJobs) ListFiles(ctx context.Context, req executor.ListFilesRequest) (executor.FileList, error) {
	return x.a.ListFiles(ctx, req)
}

// DeleteFile implements executor.Files.
func (x *admittedJobs) DeleteFile(ctx context.Context, path string) error {
	return x.a.DeleteFile(ctx, path)
}

// Client side.

var _ executor.Files = (*Client)(nil)

// fileTimeout bounds a files call beyond the client's buffer (uploads of
// up to 100 MiB included).
const fileTimeout = 5 * time.Minute

// filePath is the route of a workspace path: its segments escaped, dot
// segments too (a client or proxy must not resolve "..": the server judges
// the path, and says why it refuses it).
func filePath(p string) string {
	var parts []string
	for _, s := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		switch s {
		case "":
			continue
		case ".":
			parts = append(parts, "%2E")
		case "..":
			parts = append(parts, "%2E%2E")
		default:
			parts = append(parts, url.PathEscape(s))
		}
	}
	prefix := "/v1/files/"
	if strings.HasPrefix(p, "/") {
		prefix += "%2F" // an absolute path inside the workspace
	}
	return prefix + strings.Join(parts, "/")
}

// fileError is a files error from the server, the executor's message and
// sentinel restored.
type fileError struct {
	msg string
	is  error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.is }

func (c *Client) fileStatusError(resp *http.Response) error {
	d, err := c.errorDetail(resp)
	if err != nil {
		return err
	}
	sentinel := map[string]error{
		CodeInvalidRequest: workspace.ErrInvalidPath, CodeNotFound: fs.ErrNotExist, CodeForbidden: fs.ErrPermission,
		CodeExists: fs.ErrExist, CodeIsDirectory: workspace.ErrIsDir, CodeChanged: workspace.ErrChanged,
		CodePayloadTooLarge: workspace.ErrTooLarge,
	}[d.Code]
	if sentinel == nil {
		return c.detailError(d)
	}
	return &fileError{msg: d.Message, is: sentinel}
}

func (c *Client) fileRequest(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, err, false)
	}
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		defer resp.Body.Close()
		return nil, c.fileStatusError(resp)
	}
	return resp, nil
}

// WriteFile implements executor.Files.
func (c *Client) WriteFile(ctx context.Context, req executor.WriteFileRequest, content io.Reader) (workspace.FileInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.TimeoutBuffer+fileTimeout)
	defer cancel()
	path := filePath(req.Path)
	if req.Overwrite {
		path += "?overwrite=true"
	}
	resp, err := c.fileRequest(ctx, http.MethodPut, path, content)
	if err != nil {
		return workspace.FileInfo{}, err
	}
	defer resp.Body.Close()
	var fi workspace.FileInfo
	if err := json.NewDecoder(resp.Body).Decode(&fi); err != nil {
		return workspace.FileInfo{}, c.transportError(ctx, err, true)
	}
	return fi, nil
}

// ReadFile implements executor.Files, with a Range request.
func (c *Client) ReadFile(ctx context.Context, req executor.ReadFileRequest) (executor.FileData, error) {
	if req.Offset < 0 || req.Length <= 0 {
		return executor.FileData{}, &fileError{msg: fmt.Sprintf("offset must be >= 0 and length > 0 (got %d and %d)", req.Offset, req.Length), is: workspace.ErrInvalidPath}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.TimeoutBuffer+fileTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+filePath(req.Path), nil)
	if err != nil {
		return executor.FileData{}, err
	}
	if c.opts.Token != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	hreq.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", req.Offset, req.Offset+req.Length-1))
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return executor.FileData{}, c.transportError(ctx, err, false)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		return executor.FileData{}, c.fileStatusError(resp)
	}
	d := executor.FileData{Offset: req.Offset, Info: workspace.FileInfo{
		Path: resp.Header.Get(FilePathHeader), Type: "file", Mode: resp.Header.Get(FileModeHeader), MIME: resp.Header.Get("Content-Type"),
	}}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		d.Info.ModTime = t.UTC()
	}
	switch resp.StatusCode {
	case http.StatusPartialContent, http.StatusRequestedRangeNotSatisfiable:
		// Content-Range: bytes A-B/SIZE, or bytes */SIZE past the end.
		cr := resp.Header.Get("Content-Range")
		if i := strings.LastIndexByte(cr, '/'); i >= 0 {
			d.Info.Size, _ = strconv.ParseInt(cr[i+1:], 10, 64)
		}
		if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
			return d, nil
		}
	default: // the whole file
		d.Info.Size = resp.ContentLength
	}
	d.Data, err = io.ReadAll(io.LimitReader(resp.Body, req.Length+1))
	if err != nil {
		return executor.FileData{}, c.transportError(ctx, err, true)
	}
	if resp.StatusCode == http.StatusOK {
		d.Info.Size = max(d.Info.Size, int64(len(d.Data)))
		if req.Offset > 0 || int64(len(d.Data)) > req.Length {
			d.Data = d.Data[min(req.Offset, int64(len(d.Data))):]
			d.Data = d.Data[:min(req.Length, int64(len(d.Data)))]
		}
	}
	return d, nil
}

// ListFiles implements executor.Files.
func (c *Client) ListFiles(ctx context.Context, req executor.ListFilesRequest) (executor.FileList, error) {
	q := url.Values{}
	q.Set("dir", req.Path)
	if req.Pattern != "" {
		q.Set("pattern", req.Pattern)
	}
	if req.Recursive {
		q.Set("recursive", "true")
	}
	if req.Limit > 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.TimeoutBuffer+fileTimeout)
	defer cancel()
	resp, err := c.fileRequest(ctx, http.MethodGet, "/v1/files?"+q.Encode(), nil)
	if err != nil {
		return executor.FileList{}, err
	}
	defer resp.Body.Close()
	var l executor.FileList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return executor.FileList{}, c.transportError(ctx, err, true)
	}
	return l, nil
}

// DeleteFile implements executor.Files.
func (c *Client) DeleteFile(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.TimeoutBuffer+fileTimeout)
	defer cancel()
	resp, err := c.fileRequest(ctx, http.MethodDelete, filePath(path), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

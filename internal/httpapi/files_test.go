package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/workspace"
)

// TestFilesREST: the /v1/files routes with raw and multipart uploads,
// ranges, listings and the statuses of each refusal.
func TestFilesREST(t *testing.T) {
	f := newFixture(t)
	l := f.local(t, nil)
	l.SetMaxUpload(1000)
	ts, _ := serve(t, l, nil)
	u := ts.URL + "/v1/files/"

	r := do(t, http.MethodPut, u+"data/in.csv", []byte("a,b\n1,2\n"), "Content-Type", "text/csv")
	var fi workspace.FileInfo
	if r.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	r.json(t, &fi)
	if fi.Path != "data/in.csv" || fi.Size != 8 || len(fi.SHA256) != 64 {
		t.Fatalf("PUT: %+v", fi)
	}
	// Multipart: the first file part.
	var mb bytes.Buffer
	mw := multipart.NewWriter(&mb)
	mw.WriteField("note", "ignored")
	fw, _ := mw.CreateFormFile("file", "up.bin")
	fw.Write([]byte{0, 1, 2})
	mw.Close()
	if r := do(t, http.MethodPut, u+"up.bin", mb.Bytes(), "Content-Type", mw.FormDataContentType()); r.status != http.StatusOK {
		t.Fatalf("multipart PUT: %d %s", r.status, r.body)
	}
	if b, _ := os.ReadFile(filepath.Join(f.workspace, "up.bin")); !bytes.Equal(b, []byte{0, 1, 2}) {
		t.Fatalf("multipart content: %v", b)
	}
	// GET, whole and a range; an absolute path inside the workspace.
	if r := do(t, http.MethodGet, u+"data/in.csv", nil); r.status != 200 || string(r.body) != "a,b\n1,2\n" || r.header.Get("Content-Type") != "text/csv" || r.header.Get(httpapi.FilePathHeader) != "data/in.csv" {
		t.Fatalf("GET: %d %q %v", r.status, r.body, r.header)
	}
	if r := do(t, http.MethodGet, u+"data/in.csv", nil, "Range", "bytes=4-6"); r.status != http.StatusPartialContent || string(r.body) != "1,2" {
		t.Fatalf("GET range: %d %q", r.status, r.body)
	}
	if r := do(t, http.MethodGet, u+"%2F"+strings.TrimPrefix(f.workspace, "/")+"/hello.py", nil); r.status != 200 || !strings.Contains(string(r.body), "Hello") {
		t.Fatalf("GET absolute: %d %q", r.status, r.body)
	}
	// The listing.
	r = do(t, http.MethodGet, ts.URL+"/v1/files?dir=data&pattern=*.csv", nil)
	var list executor.FileList
	r.json(t, &list)
	if r.status != 200 || list.Path != "data" || len(list.Entries) != 1 || list.Entries[0].Path != "data/in.csv" {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	// Refusals, each with its status and code.
	os.Symlink("/etc/passwd", filepath.Join(f.workspace, "out"))
	for _, tc := range []struct {
		method, url string
		body        any
		status      int
		code        string
	}{
		{http.MethodPut, u + "data/in.csv", "again", http.StatusConflict, httpapi.CodeExists},
		{http.MethodPut, u + "big", strings.Repeat("x", 1001), http.StatusRequestEntityTooLarge, httpapi.CodePayloadTooLarge},
		{http.MethodPut, u + "data", "x", http.StatusConflict, httpapi.CodeIsDirectory},
		{http.MethodPut, u + "data/in.csv?overwrite=maybe", "x", http.StatusBadRequest, httpapi.CodeInvalidRequest},
		{http.MethodGet, u + "nope", nil, http.StatusNotFound, httpapi.CodeNotFound},
		{http.MethodGet, u + "data", nil, http.StatusConflict, httpapi.CodeIsDirectory},
		{http.MethodGet, u + "out", nil, http.StatusForbidden, httpapi.CodeForbidden},
		{http.MethodGet, u + "..%2F..%2Fetc%2Fpasswd", nil, http.StatusBadRequest, httpapi.CodeInvalidRequest},
		{http.MethodDelete, u + "data", nil, http.StatusConflict, httpapi.CodeExists},
		{http.MethodGet, ts.URL + "/v1/files?dir=nope", nil, http.StatusNotFound, httpapi.CodeNotFound},
		{http.MethodGet, ts.URL + "/v1/files?pattern=[", nil, http.StatusBadRequest, httpapi.CodeInvalidRequest},
	} {
		var r response
		if s, ok := tc.body.(string); ok {
			r = do(t, tc.method, tc.url, []byte(s))
		} else {
			r = do(t, tc.method, tc.url, nil)
		}
		if r.status != tc.status || r.errorBody(t).Code != tc.code {
			t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.url, r.status, r.body, tc.status, tc.code)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(f.workspace, "*big*")); len(left) != 0 {
		t.Errorf("an upload over the limit left %v", left)
	}
	if r := do(t, http.MethodDelete, u+"up.bin", nil); r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(filepath.Join(f.workspace, "up.bin")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("DELETE left the file")
	}
}

// TestFilesClientSameAsLocal: httpapi.Client's files calls give what the
// local executor gives, errors (text and kind) included.
func TestFilesClientSameAsLocal(t *testing.T) {
	f := newFixture(t)
	local := f.local(t, nil)
	ts, _ := serve(t, f.local(t, nil), nil)
	remote, err := httpapi.NewClient(ts.URL, httpapi.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	os.WriteFile(filepath.Join(f.workspace, "ten.txt"), []byte("0123456789"), 0o644)
	for name, fx := range map[string]executor.Files{"local": local, "remote": remote} {
		t.Run(name, func(t *testing.T) {
			d, err := fx.ReadFile(ctx, executor.ReadFileRequest{Path: "ten.txt", Offset: 3, Length: 4})
			if err != nil || string(d.Data) != "3456" || d.Info.Size != 10 || d.Info.Path != "ten.txt" || d.Info.MIME != "text/plain" {
				t.Fatalf("read: %+v %v", d, err)
			}
			if d, err := fx.ReadFile(ctx, executor.ReadFileRequest{Path: "ten.txt", Offset: 20, Length: 4}); err != nil || len(d.Data) != 0 || d.Info.Size != 10 {
				t.Fatalf("read past the end: %+v %v", d, err)
			}
			if _, err := fx.WriteFile(ctx, executor.WriteFileRequest{Path: name + "/w.txt"}, strings.NewReader("w")); err != nil {
				t.Fatal(err)
			}
			l, err := fx.ListFiles(ctx, executor.ListFilesRequest{Path: name})
			if err != nil || len(l.Entries) != 1 || l.Entries[0].Path != name+"/w.txt" {
				t.Fatalf("list: %+v %v", l, err)
			}
			if err := fx.DeleteFile(ctx, name+"/w.txt"); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		op   func(executor.Files) error
		is   error
	}{
		{"missing", func(fx executor.Files) error {
			_, err := fx.ReadFile(ctx, executor.ReadFileRequest{Path: "nope", Length: 1})
			return err
		}, fs.ErrNotExist},
		{"exists", func(fx executor.Files) error {
			_, err := fx.WriteFile(ctx, executor.WriteFileRequest{Path: "ten.txt"}, strings.NewReader("x"))
			return err
		}, fs.ErrExist},
		{"outside", func(fx executor.Files) error {
			_, err := fx.ListFiles(ctx, executor.ListFilesRequest{Path: "../.."})
			return err
		}, workspace.ErrInvalidPath},
	} {
		le, re := tc.op(local), tc.op(remote)
		if !errors.Is(le, tc.is) || !errors.Is(re, tc.is) || le.Error() != re.Error() {
			t.Errorf("%s: local %v, remote %v (want both %v, same text)", tc.name, le, re, tc.is)
		}
	}
}

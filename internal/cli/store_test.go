package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStoreURL(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "url")
	os.WriteFile(file, []byte("postgres://u:secret@db/pyexec\n"), 0o600)
	cases := []struct {
		name      string
		f         storeFlags
		want, err string
	}{
		{"default", storeFlags{}, "", ""},
		{"sqlite", storeFlags{store: "sqlite"}, "", ""},
		{"url", storeFlags{store: "postgresql://u@db/x"}, "postgresql://u@db/x", ""},
		{"file", storeFlags{storeFile: file}, "postgres://u:secret@db/pyexec", ""},
		{"both", storeFlags{store: "sqlite", storeFile: file}, "", "give one of them"},
		{"missing file", storeFlags{storeFile: filepath.Join(dir, "nope")}, "", "--store-file"},
		{"other", storeFlags{store: "mysql://u:pw@db/x"}, "", "want sqlite or a postgres:// URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.f.url()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "pw@") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("url() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestAdvertiseURL(t *testing.T) {
	host, _ := os.Hostname()
	cases := []struct{ flag, listen, want, err string }{
		{"", "127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"", "0.0.0.0:8080", "http://" + host + ":8080", ""},
		{"", "[::]:9000", "http://" + host + ":9000", ""},
		{"http://10.0.0.5:8080/", "0.0.0.0:8080", "http://10.0.0.5:8080", ""},
		{"10.0.0.5:8080", "0.0.0.0:8080", "", "want http://HOST:PORT"},
	}
	for _, tc := range cases {
		got, err := advertiseURL(tc.flag, tc.listen)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("advertiseURL(%q, %q) err = %v, want %q", tc.flag, tc.listen, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("advertiseURL(%q, %q) = %q, %v; want %q", tc.flag, tc.listen, got, err, tc.want)
		}
	}
}

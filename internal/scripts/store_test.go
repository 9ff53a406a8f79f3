package scripts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCanonicalName(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"fetch_prices", "fetch_prices", true},
		{"fetch_prices.py", "fetch_prices", true},
		{"v1.2-report", "v1.2-report", true},
		{"_private", "_private", true},
		{"", "", false},
		{".py", "", false},
		{"../etc/passwd", "", false},
		{"a/b", "", false},
		{`a\b`, "", false},
		{"..", "", false},
		{"a..b", "", false},
		{".hidden", "", false},
		{"-rf", "", false},
		{"has space", "", false},
		{"nul\x00", "", false},
		{"émoji", "", false},
		{"x.json", "", false},
		{strings.Repeat("a", MaxNameLen), strings.Repeat("a", MaxNameLen), true},
		{strings.Repeat("a", MaxNameLen+1), "", false},
	} {
		got, err := CanonicalName(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("CanonicalName(%q) = %q, %v; want %q ok=%t", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestDocLine(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`"""Fetch prices."""` + "\nprint(1)", "Fetch prices."},
		{"#!/usr/bin/env python\n# comment\n\n'''\nSummary line.\nMore.\n'''\n", "Summary line."},
		{"# /// script\n# dependencies = []\n# ///\nr\"\"\"Raw doc.\n\"\"\"", "Raw doc."},
		{"'single'", "single"},
		{"print('x')\n\"\"\"not a docstring\"\"\"", ""},
		{"f\"no\"", ""},
		{"", ""},
	} {
		if got := docLine(tc.src); got != tc.want {
			t.Errorf("docLine(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

func openStore(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSaveListViewRoundTrip(t *testing.T) {
	s := openStore(t, Options{})
	code := "#!/usr/bin/env python3\n\"\"\"Say hello with \"quotes\" and $HOME.\"\"\"\nprint('hi')\n"
	e, err := s.Save(SaveRequest{Name: "hello.py", Code: code, Dependencies: []string{"requests>=2", `weird"name`}, RequiresPython: ">=3.10"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "hello" || e.Description != `Say hello with "quotes" and $HOME.` || e.RequiresPython != ">=3.10" ||
		!slices.Equal(e.Dependencies, []string{"requests>=2", `weird"name`}) || e.MetadataError != "" {
		t.Fatalf("entry = %+v", e)
	}
	v, err := s.View("hello", false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.Source, "#!/usr/bin/env python3\n# /// script\n") || !strings.HasSuffix(v.Source, code[len("#!/usr/bin/env python3\n"):]) {
		t.Errorf("source = %q", v.Source)
	}
	if v.Sidecar == nil || v.Sidecar.Name != "hello" || v.Sidecar.CodeSHA256 != sha(v.Source) {
		t.Errorf("sidecar = %+v", v.Sidecar)
	}
	if fi, err := os.Stat(e.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("saved script mode = %v, %v; want 0600 (code can hold secrets)", fi.Mode(), err)
	}
	src, err := s.Source("hello.py")
	if err != nil || src != v.Source {
		t.Errorf("Source = %q, %v", src, err)
	}

	// No overwrite by accident; overwrite on request.
	_, err = s.Save(SaveRequest{Name: "hello", Code: "print(2)"})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "name" || !strings.Contains(err.Error(), "overwrite") {
		t.Errorf("second save: %v", err)
	}
	if _, err := s.Save(SaveRequest{Name: "hello", Code: "print(2)", Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if src, _ := s.Source("hello"); src != "print(2)" {
		t.Errorf("after overwrite: %q", src)
	}

	if _, err := s.Save(SaveRequest{Name: "b_script", Code: "# /// script\n# dependencies = [\"x\"]\n# ///\nprint(1)\n"}); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "b_script" || !slices.Equal(list[0].Dependencies, []string{"x"}) || list[1].Name != "hello" {
		t.Errorf("list = %+v", list)
	}
}

func TestSaveRejects(t *testing.T) {
	s := openStore(t, Options{})
	block := "# /// script\n# dependencies = []\n# ///\nprint(1)\n"
	for _, tc := range []struct {
		name  string
		req   SaveRequest
		field string
	}{
		{"bad name", SaveRequest{Name: "../x", Code: "pass"}, "name"},
		{"empty code", SaveRequest{Name: "x", Code: "  \n"}, "code"},
		{"multi-line dep", SaveRequest{Name: "x", Code: "pass", Dependencies: []string{"a\nb"}}, "dependencies"},
		{"header twice", SaveRequest{Name: "x", Code: block, Dependencies: []string{"a"}}, "dependencies"},
		{"too big", SaveRequest{Name: "x", Code: strings.Repeat("#", MaxScriptBytes+1)}, "code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Save(tc.req)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("err = %v, want a field error on %s", err, tc.field)
			}
		})
	}
	if _, err := s.View("nope", false); err == nil || !strings.Contains(err.Error(), "list_scripts") {
		t.Errorf("view unknown: %v", err)
	}
}

func TestAutosaveAndRetention(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	dir := t.TempDir()
	s, err := Open(dir, Options{MaxAutosaved: 3, MaxAge: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range 5 {
		names = append(names, s.Autosave(AutosaveRecord{Tool: "run_python", Code: fmt.Sprintf("print(%d)", i),
			Arguments: map[string]any{"args": []string{"a"}, "env_vars": map[string]string{"K": "<redacted>"}}, JobID: "j1"}))
		advance(time.Second)
	}
	s.Flush()
	list, err := s.List(true)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].Name != names[4] || list[2].Name != names[2] || !list[0].Autosaved {
		t.Fatalf("after count retention: %+v (names %v)", list, names)
	}
	v, err := s.View(names[4], true)
	if err != nil {
		t.Fatal(err)
	}
	if v.Source != "print(4)" || v.Sidecar == nil || v.Sidecar.Tool != "run_python" || v.Sidecar.JobID != "j1" ||
		v.Sidecar.Arguments["env_vars"].(map[string]any)["K"] != "<redacted>" {
		t.Errorf("view = %+v", v)
	}
	if _, err := s.View(names[4], false); err == nil {
		t.Error("an autosaved run was found among saved scripts")
	}
	s.Close()

	// Age: reopening an hour later removes everything older than MaxAge.
	advance(2 * time.Hour)
	s2, err := Open(dir, Options{MaxAutosaved: 3, MaxAge: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if list, _ := s2.List(true); len(list) != 0 {
		t.Errorf("after age retention: %+v", list)
	}
	if des, _ := os.ReadDir(filepath.Join(dir, "autosaved")); len(des) != 0 {
		t.Errorf("files left: %v", des)
	}
	if s2.Autosave(AutosaveRecord{Tool: "t", Code: "pass"}) == "" {
		t.Error("autosave after reopen returned no name")
	}
	s2.Close()
	if s2.Autosave(AutosaveRecord{Tool: "t", Code: "pass"}) != "" {
		t.Error("autosave after close queued a record")
	}
}

func TestAutosaveDisabled(t *testing.T) {
	s := openStore(t, Options{MaxAutosaved: -1})
	if s.Autosave(AutosaveRecord{Tool: "t", Code: "pass"}) != "" {
		t.Error("disabled autosave queued a record")
	}
}

// BenchmarkAutosave measures what an inline run pays on its hot path: one
// hash of the code and a channel send (the writing happens elsewhere).
func BenchmarkAutosave(b *testing.B) {
	s, err := Open(b.TempDir(), Options{MaxAutosaved: 50})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	code := strings.Repeat("print('hello world')\n", 50) // ~1 KiB
	args := map[string]any{"timeout": 30}
	b.ResetTimer()
	for b.Loop() {
		s.Autosave(AutosaveRecord{Tool: "run_python", Code: code, Arguments: args})
	}
	b.StopTimer()
	s.Flush()
}

// BenchmarkAutosaveWriter measures the background writer: how many
// autosaves per second it stores (with retention), i.e. the burst rate
// beyond which the queue fills and autosaves are dropped.
func BenchmarkAutosaveWriter(b *testing.B) {
	s, err := Open(b.TempDir(), Options{MaxAutosaved: 50})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	code := strings.Repeat("print('hello world')\n", 50)
	args := map[string]any{"timeout": 30}
	b.ResetTimer()
	for b.Loop() {
		s.Autosave(AutosaveRecord{Tool: "run_python", Code: code, Arguments: args})
		s.Flush()
	}
}

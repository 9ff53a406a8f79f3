package uvenv

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"Foo.Bar_baz": "foo-bar-baz", "foo--bar": "foo-bar", "NumPy": "numpy", "a_._b": "a-b",
	} {
		if got := NormalizeName(in); got != want {
			t.Errorf("NormalizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizeRequirements(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{name: "sorted and normalized", in: []string{"Requests >= 2.0", "numpy"}, want: []string{"numpy", "requests>=2.0"}},
		{name: "duplicates collapse", in: []string{"PyExec_Alpha==1.0", "pyexec-alpha == 1.0", " "}, want: []string{"pyexec-alpha==1.0"}},
		{name: "extras sorted", in: []string{"Foo[Zeta, alpha]>=1,<2"}, want: []string{"foo[alpha,zeta]>=1,<2"}},
		{name: "marker kept", in: []string{`foo>=1 ;  python_version  >= "3.8"`}, want: []string{`foo>=1; python_version >= "3.8"`}},
		{name: "url", in: []string{"Foo @ https://example.com/foo-1.0-py3-none-any.whl"}, want: []string{"foo @ https://example.com/foo-1.0-py3-none-any.whl"}},
		{name: "parenthesized spec", in: []string{"foo (>=1.0)"}, want: []string{"foo>=1.0"}},
		{name: "option injection", in: []string{"--index-url=http://evil"}, wantErr: "starts with a package name"},
		{name: "newline", in: []string{"foo\n--index-url x"}, wantErr: "single line"},
		{name: "garbage after name", in: []string{"foo bar"}, wantErr: "not a version specifier"},
		{name: "unclosed extras", in: []string{"foo[bar"}, wantErr: "unclosed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeRequirements(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseScriptMetadata(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    ScriptMetadata
		wantErr string
	}{
		{name: "no block", src: "print('hi')\n", want: ScriptMetadata{}},
		{name: "valid", src: "#!/usr/bin/env python\n# /// script\n# requires-python = \">=3.9\"\n# dependencies = [\n#   \"pyexec-beta\",\n#   \"pyexec-alpha==2.0\",\n# ]\n# ///\nimport pyexec_beta\n",
			want: ScriptMetadata{Found: true, Dependencies: []string{"pyexec-beta", "pyexec-alpha==2.0"}, RequiresPython: ">=3.9"}},
		{name: "crlf and no trailing newline", src: "# /// script\r\n# dependencies = [\"a\"]\r\n#\r\n# ///",
			want: ScriptMetadata{Found: true, Dependencies: []string{"a"}}},
		{name: "other block types ignored", src: "# /// pyproject\n# x = 1\n# ///\n", want: ScriptMetadata{}},
		{name: "tool table allowed", src: "# /// script\n# dependencies = []\n# [tool.uv]\n# exclude-newer = \"2024-01-01T00:00:00Z\"\n# ///\n",
			want: ScriptMetadata{Found: true, Dependencies: []string{}}},
		{name: "invalid toml", src: "# /// script\n# dependencies = [\n# ///\n", wantErr: "not valid TOML"},
		{name: "unclosed", src: "# /// script\n# dependencies = []\nprint(1)\n", wantErr: "not closed"},
		{name: "two blocks", src: "# /// script\n# dependencies = []\n# ///\nimport os\n# /// script\n# dependencies = []\n# ///\n", wantErr: "at most one"},
		{name: "bad requirement", src: "# /// script\n# dependencies = [\"-e .\"]\n# ///\n", wantErr: "dependencies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseScriptMetadata([]byte(tt.src))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestSatisfiesPython(t *testing.T) {
	tests := []struct {
		version, spec string
		want          bool
	}{
		{"3.11.7", "", true},
		{"3.11.7", ">=3.9", true},
		{"3.8.18", ">=3.9", false},
		{"3.11.7", ">=3.9,<3.11", false},
		{"3.11.7", "~=3.10", true},
		{"3.11.7", "~=3.11.8", false},
		{"3.11.7", "==3.11.*", true},
		{"3.12.1", "==3.11.*", false},
		{"3.11.7", "!=3.11.*", false},
		{"3.11.0", "==3.11", true},
		{"3.13.0rc1", ">=3.13", true},
		{"3.11.7", "> 3.11", true},
	}
	for _, tt := range tests {
		got, err := SatisfiesPython(tt.version, tt.spec)
		if err != nil {
			t.Errorf("SatisfiesPython(%q, %q): %v", tt.version, tt.spec, err)
			continue
		}
		if got != tt.want {
			t.Errorf("SatisfiesPython(%q, %q) = %v, want %v", tt.version, tt.spec, got, tt.want)
		}
	}
	if _, err := SatisfiesPython("3.11", "=>3"); err == nil {
		t.Error("bad operator accepted")
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDetectProject(t *testing.T) {
	ws := t.TempDir()
	project := "[project]\nname = \"demo\"\nversion = \"0.1\"\n"
	writeFile(t, filepath.Join(ws, "app", "pyproject.toml"), project)
	writeFile(t, filepath.Join(ws, "app", "uv.lock"), "version = 1\n")
	writeFile(t, filepath.Join(ws, "app", "src", "pkg", "x.py"), "")
	writeFile(t, filepath.Join(ws, "tools", "pyproject.toml"), "[tool.black]\nline-length = 100\n")
	writeFile(t, filepath.Join(ws, "tools", "x.py"), "")
	writeFile(t, filepath.Join(ws, "mono", "pyproject.toml"), "[project]\nname = \"root\"\nversion = \"0\"\n[tool.uv.workspace]\nmembers = [\"libs/*\"]\n")
	writeFile(t, filepath.Join(ws, "mono", "uv.lock"), "version = 1\n")
	writeFile(t, filepath.Join(ws, "mono", "libs", "a", "pyproject.toml"), "[project]\nname = \"a\"\nversion = \"0\"\n")
	writeFile(t, filepath.Join(ws, "unmanaged", "pyproject.toml"), project+"[tool.uv]\nmanaged = false\n")
	writeFile(t, filepath.Join(ws, "broken", "pyproject.toml"), "[project\n")

	tests := []struct {
		name, start, root string
		want              Project
		ok                bool
		wantErr           bool
	}{
		{name: "nested script", start: "app/src/pkg", root: "", want: Project{Dir: "app", Root: "app", Lock: "app/uv.lock"}, ok: true},
		{name: "project dir itself", start: "app", root: "", want: Project{Dir: "app", Root: "app", Lock: "app/uv.lock"}, ok: true},
		{name: "pyproject without [project]", start: "tools", root: "", ok: false},
		{name: "workspace member", start: "mono/libs/a", root: "", want: Project{Dir: "mono/libs/a", Root: "mono", Lock: "mono/uv.lock"}, ok: true},
		{name: "workspace root not above the boundary", start: "mono/libs/a", root: "mono/libs/a", want: Project{Dir: "mono/libs/a", Root: "mono/libs/a"}, ok: true},
		{name: "stops at root", start: "app/src/pkg", root: "app/src", ok: false},
		{name: "start outside root", start: "app", root: "tools", ok: false},
		{name: "managed = false", start: "unmanaged", root: "", ok: false},
		{name: "broken pyproject", start: "broken", root: "", wantErr: true},
	}
	abs := func(p string) string {
		if p == "" {
			return ""
		}
		return filepath.Join(ws, p)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := ws
			if tt.root != "" {
				root = abs(tt.root)
			}
			got, ok, err := DetectProject(nil, abs(tt.start), root)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tt.ok, got)
			}
			want := Project{Dir: abs(tt.want.Dir), Root: abs(tt.want.Root), Lock: abs(tt.want.Lock)}
			if ok && got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			if dir, fok := FindProject(abs(tt.start), root); fok != (ok && err == nil) || (fok && dir != want.Dir) {
				t.Fatalf("FindProject = %q, %v", dir, fok)
			}
		})
	}
}

func TestPhaseOf(t *testing.T) {
	for line, want := range map[string]string{
		"Resolved 3 packages in 2ms":        PhaseDownloading,
		"Prepared 3 packages in 8ms":        PhaseInstalling,
		"Installed 3 packages in 4ms":       PhaseInstalling,
		"Bytecode compiled 4 files in 28ms": PhaseInstalling,
		" + pyexec-alpha==2.0":              PhaseInstalling,
		"Downloading numpy (16.0MiB)":       PhaseDownloading,
		"error: No solution found":          "",
	} {
		if got := phaseOf(line); got != want {
			t.Errorf("phaseOf(%q) = %q, want %q", line, got, want)
		}
	}
}

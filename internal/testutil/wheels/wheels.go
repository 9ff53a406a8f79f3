// Package wheels builds tiny pure-Python wheels for tests, by hand, without
// network access or any Python build tool. Dependency tests point uv at the
// directory these wheels land in (--no-index --find-links DIR --offline), so
// they are hermetic: nothing is ever downloaded.
//
// A wheel is a zip archive with the package's modules plus a
// NAME-VERSION.dist-info directory holding METADATA, WHEEL and RECORD
// (PEP 427, PEP 491). That is all an installer needs for a pure-Python
// package, so archive/zip is enough to make one.
package wheels

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Package describes one wheel to build.
type Package struct {
	// Name is the distribution name, e.g. "pyexec-alpha" or "pyexec_alpha".
	// The import package is the name with "-" and "." replaced by "_".
	Name    string
	Version string
	// Requires are PEP 508 requirement strings (Requires-Dist).
	Requires []string
	// RequiresPython is an optional Requires-Python specifier.
	RequiresPython string
	// Files are extra files inside the import package (relative names like
	// "util.py"). The package always gets an __init__.py defining
	// __version__ and NAME unless Files provides its own "__init__.py".
	Files map[string]string
	// Scripts are console_scripts entry points: command name -> "module:func".
	Scripts map[string]string
	// Module, when set, is the import package instead of the name-derived
	// one (a stand-in for beautifulsoup4 installs bs4).
	Module string
}

var nonAlnum = regexp.MustCompile(`[-_.]+`)

// importName is the module directory a distribution installs.
func importName(dist string) string {
	return strings.ToLower(nonAlnum.ReplaceAllString(dist, "_"))
}

// FileName is the wheel's file name for p (PEP 427, with the distribution name
// normalized to lower case and underscores as PEP 625/wheel tools do).
func FileName(p Package) string {
	return fmt.Sprintf("%s-%s-py3-none-any.whl", importName(p.Name), p.Version)
}

// Build writes one wheel per package into dir and returns their paths.
func Build(dir string, pkgs ...Package) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("wheels: create %s: %w", dir, err)
	}
	var paths []string
	for _, p := range pkgs {
		path, err := build(dir, p)
		if err != nil {
			return nil, fmt.Errorf("wheels: build %s %s: %w", p.Name, p.Version, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func build(dir string, p Package) (string, error) {
	if p.Name == "" || p.Version == "" {
		return "", fmt.Errorf("name and version are required")
	}
	mod := importName(p.Name)
	distInfo := fmt.Sprintf("%s-%s.dist-info", mod, p.Version)
	if p.Module != "" {
		mod = p.Module
	}

	files := map[string]string{}
	files[mod+"/__init__.py"] = fmt.Sprintf("__version__ = %q\nNAME = %q\n", p.Version, mod)
	for name, body := range p.Files {
		files[mod+"/"+name] = body
	}

	var meta strings.Builder
	fmt.Fprintf(&meta, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n", p.Name, p.Version)
	if p.RequiresPython != "" {
		fmt.Fprintf(&meta, "Requires-Python: %s\n", p.RequiresPython)
	}
	for _, r := range p.Requires {
		fmt.Fprintf(&meta, "Requires-Dist: %s\n", r)
	}
	files[distInfo+"/METADATA"] = meta.String()
	files[distInfo+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: pyexec-testutil\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	if len(p.Scripts) > 0 {
		var ep strings.Builder
		ep.WriteString("[console_scripts]\n")
		for _, name := range sortedKeys(p.Scripts) {
			fmt.Fprintf(&ep, "%s = %s\n", name, p.Scripts[name])
		}
		files[distInfo+"/entry_points.txt"] = ep.String()
	}

	path := filepath.Join(dir, FileName(p))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	zw := zip.NewWriter(f)
	var record strings.Builder
	for _, name := range sortedKeys(files) {
		body := []byte(files[name])
		if err := writeEntry(zw, name, body); err != nil {
			f.Close()
			return "", err
		}
		sum := sha256.Sum256(body)
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", name, base64.RawURLEncoding.EncodeToString(sum[:]), len(body))
	}
	recordName := distInfo + "/RECORD"
	fmt.Fprintf(&record, "%s,,\n", recordName)
	if err := writeEntry(zw, recordName, []byte(record.String())); err != nil {
		f.Close()
		return "", err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return path, nil
}

func writeEntry(zw *zip.Writer, name string, body []byte) error {
	h := &zip.FileHeader{Name: name, Method: zip.Deflate}
	h.SetMode(0o644)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = w.Write(body)
	return err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Standard is the set of wheels the dependency tests share:
//
//	pyexec-alpha 1.0 and 2.0 (two versions of one package)
//	pyexec-beta 1.0, which requires pyexec-alpha>=1 (transitive resolution)
//	pyexec-gamma 1.0, which requires pyexec-alpha<1 (unsatisfiable: conflicts)
//	pyexec-tool 1.0, with a console script "pyexec-tool" (relocation of entry points)
func Standard() []Package {
	return []Package{
		{Name: "pyexec-alpha", Version: "1.0"},
		{Name: "pyexec-alpha", Version: "2.0"},
		{Name: "pyexec-beta", Version: "1.0", Requires: []string{"pyexec-alpha>=1"}},
		{Name: "pyexec-gamma", Version: "1.0", Requires: []string{"pyexec-alpha<1"}},
		{Name: "pyexec-tool", Version: "1.0",
			Files:   map[string]string{"cli.py": "def main():\n    print('pyexec-tool ok')\n"},
			Scripts: map[string]string{"pyexec-tool": "pyexec_tool.cli:main"}},
	}
}

// Dir builds the Standard wheels (or pkgs, when given) into a fresh temporary
// directory owned by t and returns it. The directory is world-readable so
// tests that run Python as an unprivileged user can still read it.
func Dir(t testing.TB, pkgs ...Package) string {
	t.Helper()
	if len(pkgs) == 0 {
		pkgs = Standard()
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(dir, pkgs...); err != nil {
		t.Fatal(err)
	}
	return dir
}

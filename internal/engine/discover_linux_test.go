package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// shimScript is pyenv's shim template, as `pyenv rehash` writes it.
func shimScript(root string) string {
	return `#!/usr/bin/env bash
set -e
[ -n "$PYENV_DEBUG" ] && set -x

program="${0##*/}"

export PYENV_ROOT="` + root + `"
SHIM_PATH=${0%/*}
if [[ $SHIM_PATH != "` + root + `/shims" ]]; then
  export _PYENV_SHIM_PATH="$SHIM_PATH"
fi
exec "` + root + `/libexec/pyenv" exec "$program" "$@"
`
}

// fakePyenv makes a pyenv root with the given versions (each with bin/python3
// and bin/python3.X), a global version file and shims.
func fakePyenv(t *testing.T, global string, versions ...string) (root string) {
	t.Helper()
	root = t.TempDir()
	for _, v := range versions {
		bin := filepath.Join(root, "versions", v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		mm := v[:strings.LastIndex(v, ".")]
		for _, name := range []string{"python3", "python" + mm} {
			if err := os.WriteFile(filepath.Join(bin, name), []byte("\x7fELF"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if global != "" {
		if err := os.WriteFile(filepath.Join(root, "version"), []byte(global), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "shims"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"python3", "python3.12", "python3.11"} {
		if err := os.WriteFile(filepath.Join(root, "shims", name), []byte(shimScript(root)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestPyenvTarget(t *testing.T) {
	root := fakePyenv(t, "# the global one\n\n3.11.7\n", "3.11.7", "3.12.1")
	local := t.TempDir()
	deep := filepath.Join(local, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, ".python-version"), []byte("3.12.1\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := func(ver, name string) string { return filepath.Join(root, "versions", ver, "bin", name) }
	for _, tc := range []struct {
		name, shim, cwd string
		env             map[string]string
		writable        func(string) bool
		want            string
	}{
		{name: "global version", shim: "python3", cwd: "/", want: v("3.11.7", "python3")},
		{name: "local .python-version above the cwd", shim: "python3", cwd: deep, want: v("3.12.1", "python3")},
		{name: "PYENV_DIR before the cwd", shim: "python3", cwd: "/", env: map[string]string{"PYENV_DIR": deep}, want: v("3.12.1", "python3")},
		{name: "PYENV_VERSION wins", shim: "python3", cwd: deep, env: map[string]string{"PYENV_VERSION": "3.11.7"}, want: v("3.11.7", "python3")},
		{name: "several versions: the first that has the program", shim: "python3.12", cwd: "/", env: map[string]string{"PYENV_VERSION": "3.11.7:3.12.1"}, want: v("3.12.1", "python3.12")},
		{name: "program missing in the selected version", shim: "python3.12", cwd: "/", want: ""},
		{name: "system is PATH's business", shim: "python3", cwd: "/", env: map[string]string{"PYENV_VERSION": "system"}, want: ""},
		{name: "a prefix pyenv latest would resolve", shim: "python3", cwd: "/", env: map[string]string{"PYENV_VERSION": "3.12"}, want: ""},
		{name: "python- prefix", shim: "python3", cwd: "/", env: map[string]string{"PYENV_VERSION": "python-3.12.1"}, want: v("3.12.1", "python3")},
		{name: "a .python-version runs can write is passed over", shim: "python3", cwd: deep, writable: func(p string) bool { return strings.HasPrefix(p, local) }, want: v("3.11.7", "python3")},
		{name: "path traversal is never followed", shim: "python3", cwd: "/", env: map[string]string{"PYENV_VERSION": "../../x"}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shim := filepath.Join(root, "shims", tc.shim)
			r, ok := pyenvShim(shim)
			if !ok || r != root {
				t.Fatalf("pyenvShim(%s) = %q, %v; want the root %s", shim, r, ok, root)
			}
			got := pyenvTarget(shim, r, func(k string) string { return tc.env[k] }, tc.cwd, tc.writable)
			if got != tc.want {
				t.Errorf("pyenvTarget = %q, want %q", got, tc.want)
			}
		})
	}
	if _, ok := pyenvShim(v("3.11.7", "python3")); ok {
		t.Error("a binary was taken for a shim")
	}
}

// TestPyenvShimMatchesPyenv checks the static resolution against the real
// pyenv on this machine, when it has one.
func TestPyenvShimMatchesPyenv(t *testing.T) {
	shim, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	root, ok := pyenvShim(shim)
	if !ok {
		t.Skip("python3 on PATH is not a pyenv shim")
	}
	out, err := exec.Command(shim, "-S", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("the shim does not run: %v", err)
	}
	cwd, _ := os.Getwd()
	got := pyenvTarget(shim, root, os.Getenv, cwd, nil)
	if got == "" {
		t.Skip("pyenv's selection here needs more than files (system, a prefix)")
	}
	if want := strings.TrimSpace(string(out)); !sameBinary(got, want) {
		t.Errorf("static resolution found %s, the shim runs %s", got, want)
	}
}

func TestInterpCacheUsesOnlyUnchangedFiles(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(bin, []byte("\x7fELF one"), 0o755); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(bin)
	key := statKey(bin, fi)
	c := newInterpCache(dir)
	c.remember(key, Interpreter{Path: bin, Version: "3.11.7"})
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	if it, ok := newInterpCache(dir).probe(key); !ok || it.Version != "3.11.7" || it.Path != bin {
		t.Fatalf("a new cache read %+v, %v; want what was saved", it, ok)
	}

	// Rewritten: another file as far as the cache is concerned.
	if err := os.WriteFile(bin, []byte("\x7fELF two!"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok := newInterpCache(dir).probe(key); ok {
		t.Error("an entry was used after its executable changed")
	}

	// A cache file others may write is not read.
	c2 := newInterpCache(dir)
	fi, _ = os.Stat(bin)
	c2.remember(statKey(bin, fi), Interpreter{Path: bin, Version: "3.12.0"})
	if err := c2.save(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "interpreters.json"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, ok := newInterpCache(dir).probe(statKey(bin, fi)); ok {
		t.Error("a world-writable cache file was trusted")
	}
	// Nor one reached through a symlink.
	if err := os.Chmod(filepath.Join(dir, "interpreters.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "interpreters.json"), filepath.Join(other, "interpreters.json")); err != nil {
		t.Fatal(err)
	}
	if _, ok := newInterpCache(other).probe(statKey(bin, fi)); ok {
		t.Error("a cache file behind a symlink was trusted")
	}
}

// TestDiscoveryUsesCache: the list comes without executing a pyenv
// shim or waiting for uv, a new engine on the same state dir learns it
// from the cache without probing, and the list holds the default.
func TestDiscoveryUsesCache(t *testing.T) {
	state := t.TempDir()
	e1, err := New(Config{Workspace: t.TempDir(), StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	list := e1.Interpreters(ctx)
	def, err := e1.DefaultInterpreter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, it := range list {
		if _, shim := pyenvShim(it.Path); shim {
			t.Errorf("discovery listed the pyenv shim %s", it.Path)
		}
		found = found || sameBinary(it.Path, def.Path)
	}
	if !found {
		t.Errorf("the default interpreter %s is not in the list %v", def.Path, list)
	}
	e1.Close()
	if _, err := os.Stat(filepath.Join(state, "interpreters.json")); err != nil {
		t.Fatalf("no interpreter cache was written: %v", err)
	}

	e2, err := New(Config{Workspace: t.TempDir(), StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	for _, it := range list {
		fi, err := os.Stat(it.Path)
		if err != nil {
			t.Fatal(err)
		}
		if cached, ok := e2.interps.cache.probe(statKey(it.Path, fi)); !ok || cached.Version != it.Version {
			t.Errorf("%s (%s) is not in the cache a new engine reads (%+v, %v)", it.Path, it.Version, cached, ok)
		}
	}
	if got := e2.Interpreters(ctx); len(got) != len(list) {
		t.Errorf("a new engine lists %d interpreters, the first %d", len(got), len(list))
	}
}

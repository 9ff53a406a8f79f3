package engine

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// pyenv shims.
//
// A pyenv shim is a bash script that runs `pyenv exec PROGRAM`, which works
// out the selected version and execs that version's binary. Executing one
// costs 100-500 ms of bash here (and a shim for a version that is not
// selected fails after as long), so the server never executes one to learn
// where it leads: it follows pyenv's own rules, reading the files pyenv
// reads. When they do not lead to one installed binary (the "system"
// version, a version prefix pyenv would resolve with `pyenv latest`, a
// version that is not installed), the answer is "unknown" and the caller
// decides: discovery skips the shim (pyenv's versions are listed from
// $PYENV_ROOT/versions anyway), a configured default interpreter is probed
// through it as before.

// shimRoot matches the PYENV_ROOT a shim exports, and shimExec the line
// that hands over to pyenv (pyenv's shim template, unchanged since 2013).
var (
	shimRoot = regexp.MustCompile(`(?m)^export PYENV_ROOT="([^"$` + "`" + `\\]+)"$`)
	shimExec = regexp.MustCompile(`(?m)^exec "([^"$` + "`" + `\\]+)/libexec/pyenv" exec "\$program" "\$@"$`)
)

// pyenvShim reports whether path is a pyenv shim, and if so the PYENV_ROOT
// it runs pyenv with.
func pyenvShim(path string) (root string, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if !bytes.HasPrefix(head, []byte("#!")) || !bytes.Contains(head, []byte("pyenv")) {
		return "", false
	}
	m := shimExec.FindSubmatch(head)
	if m == nil {
		return "", false
	}
	root = string(m[1])
	if r := shimRoot.FindSubmatch(head); r != nil {
		root = string(r[1])
	}
	return root, filepath.IsAbs(root)
}

// pyenvTarget is the binary the pyenv shim at path would exec, found the
// way pyenv finds it (PYENV_VERSION, else the nearest .python-version from
// PYENV_DIR or the current directory up, else $PYENV_ROOT/version; the
// first selected version that has the program), or "" when pyenv's rules
// would need more than files to decide (see the top of this file).
//
// A .python-version for which runWritable is true (one in the workspace or
// the state dir) is passed over as if it were not there: a run could have
// written it, and it would choose what the server executes.
func pyenvTarget(path, root string, getenv func(string) string, cwd string, runWritable func(string) bool) string {
	program := filepath.Base(path) // the shim runs ${0##*/}
	var versions []string
	if v := getenv("PYENV_VERSION"); v != "" {
		versions = strings.Split(v, ":")
	} else {
		file := ""
		for _, dir := range []string{getenv("PYENV_DIR"), cwd} {
			if dir == "" {
				continue
			}
			if file = nearestVersionFile(dir, runWritable); file != "" {
				break
			}
		}
		if file == "" {
			file = filepath.Join(root, "version")
		}
		versions = readVersionFile(file)
	}
	for _, v := range versions {
		if v == "" || v == "system" || v == "." || v == ".." || strings.ContainsRune(v, '/') {
			return "" // PATH without shims, or a name pyenv vets itself
		}
		dir := filepath.Join(root, "versions", v)
		if _, err := os.Stat(dir); err != nil {
			if trimmed := strings.TrimPrefix(v, "python-"); trimmed != v {
				dir = filepath.Join(root, "versions", trimmed)
			}
			if _, err := os.Stat(dir); err != nil {
				return "" // a prefix `pyenv latest` would resolve, or not installed
			}
		}
		bin := filepath.Join(dir, "bin", program)
		if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return bin
		}
	}
	return "" // not in any selected version: pyenv falls back to the system's
}

// nearestVersionFile is pyenv's find_local_version_file: the first
// .python-version in dir or above it (skipping those runWritable reports).
func nearestVersionFile(dir string, runWritable func(string) bool) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		p := filepath.Join(d, ".python-version")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && (runWritable == nil || !runWritable(p)) {
			return p
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// readVersionFile is pyenv's version-file-read: the first word of each
// line, skipping empty lines and comments.
func readVersionFile(file string) []string {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for sc.Scan() {
		fields := strings.Fields(strings.ReplaceAll(sc.Text(), "\r", " "))
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		out = append(out, fields[0])
	}
	return out
}

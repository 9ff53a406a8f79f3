package uvenv

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// installed lists the distributions in a venv as "name==version", read from
// their .dist-info METADATA. It answers what `uv pip freeze` would without
// starting another process on the cold path of every build.
func installed(venv string) ([]string, error) {
	metas, err := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages", "*.dist-info", "METADATA"))
	if err != nil {
		return nil, fmt.Errorf("list installed distributions: %w", err)
	}
	var out []string
	for _, path := range metas {
		name, version, err := readMetadata(path)
		if err != nil {
			return nil, err
		}
		out = append(out, NormalizeName(name)+"=="+version)
	}
	slices.Sort(out)
	return out, nil
}

// readMetadata reads the Name and Version headers of a METADATA file (the
// headers end at the first blank line).
func readMetadata(path string) (name, version string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() && (name == "" || version == "") {
		line := sc.Text()
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Name:"); ok {
			name = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "Version:"); ok {
			version = strings.TrimSpace(v)
		}
	}
	if name == "" || version == "" {
		return "", "", fmt.Errorf("read %s: no Name or Version header", path)
	}
	return name, version, nil
}

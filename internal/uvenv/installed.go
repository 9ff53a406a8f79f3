package uvenv

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pyexec/pyexec/internal/workspace"
)

// installed lists the distributions in a venv as "name==version", read from
// their .dist-info METADATA. It answers what `uv pip freeze` would without
// starting another process on the cold path of every build. A confined
// build wrote these files, so no symlink is followed on the way to them
// (lib/pythonX.Y/site-packages/NAME.dist-info/METADATA, opened below the
// venv with workspace.OpenBeneath).
func installed(venv string) ([]string, error) {
	var out []string
	libs, err := os.ReadDir(filepath.Join(venv, "lib"))
	if err != nil {
		return nil, fmt.Errorf("list installed distributions: %w", err)
	}
	for _, lib := range libs {
		if !lib.IsDir() || !strings.HasPrefix(lib.Name(), "python") {
			continue // lib64 and friends may be symlinks: never followed
		}
		site := filepath.Join("lib", lib.Name(), "site-packages")
		dists, err := os.ReadDir(filepath.Join(venv, site))
		if err != nil {
			continue
		}
		for _, d := range dists {
			if !d.IsDir() || !strings.HasSuffix(d.Name(), ".dist-info") {
				continue
			}
			name, version, err := readMetadata(venv, filepath.Join(site, d.Name(), "METADATA"))
			if err != nil {
				return nil, err
			}
			out = append(out, NormalizeName(name)+"=="+version)
		}
	}
	slices.Sort(out)
	return out, nil
}

// readMetadata reads the Name and Version headers of a METADATA file (the
// headers end at the first blank line).
func readMetadata(venv, rel string) (name, version string, err error) {
	path := filepath.Join(venv, rel)
	f, err := workspace.OpenBeneath(venv, rel, workspace.ServerRights)
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

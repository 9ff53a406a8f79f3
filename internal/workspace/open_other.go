//go:build !linux

package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// OpenBeneath opens dir/rel with no symlink anywhere in rel and never above
// dir. Off Linux there is no openat2: each component is checked with
// Lstat (a symlink is refused with ErrChanged) and the file is then opened
// through an os.Root, which itself refuses to leave dir, so a swap between
// the check and the open cannot reach outside dir. Runs execute as the
// server off Linux, so only ServerRights are possible.
func OpenBeneath(dir, rel string, w Rights) (*os.File, error) {
	if !w.Server {
		return nil, fmt.Errorf("%s: reading with a run user's rights needs Linux (runs execute as the server on %s): %w", rel, runtime.GOOS, fs.ErrPermission)
	}
	parts := strings.Split(filepath.Clean(rel), string(filepath.Separator))
	if filepath.IsAbs(rel) || len(parts) == 0 || parts[0] == ".." || parts[0] == "." {
		return nil, fmt.Errorf("%s: not a path below %s", rel, dir)
	}
	at := dir
	for _, part := range parts {
		at = filepath.Join(at, part)
		fi, err := os.Lstat(at)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", at, os.ErrNotExist)
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", at, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s %w", at, ErrChanged)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer root.Close()
	f, err := root.Open(filepath.ToSlash(filepath.Clean(rel)))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", at, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", at)
	}
	return f, nil
}

//go:build !windows

package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

func idOf(path string) (fileID, bool) {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), st.Ino}, true
}

// ownedSecurely checks p and its ancestors: owned by root or the server's
// uid, not writable by group or others (symlinks' own modes mean nothing).
func ownedSecurely(p string) error {
	euid := uint32(os.Geteuid())
	for cur := p; ; cur = filepath.Dir(cur) {
		var st syscall.Stat_t
		if err := syscall.Lstat(cur, &st); err != nil {
			return err
		}
		if st.Uid != 0 && st.Uid != euid {
			return fmt.Errorf("%s belongs to uid %d", cur, st.Uid)
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFLNK && st.Mode&0o022 != 0 {
			return fmt.Errorf("%s is writable by others (mode %04o)", cur, st.Mode&0o7777)
		}
		if cur == "/" {
			return nil
		}
	}
}

// privateFile reports whether the file fi (opened at path) is the server's
// own: owned by its uid, readable and writable by no one else, in a
// directory owned by root or the server's uid that no one else may write
// into (or only with the sticky bit, which keeps them from replacing it).
func privateFile(path string, fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	euid := uint32(os.Geteuid())
	if !ok || st.Uid != euid || st.Mode&0o077 != 0 {
		return false
	}
	var dir syscall.Stat_t
	if syscall.Stat(filepath.Dir(path), &dir) != nil || (dir.Uid != 0 && dir.Uid != euid) {
		return false
	}
	return dir.Mode&0o022 == 0 || dir.Mode&syscall.S_ISVTX != 0
}

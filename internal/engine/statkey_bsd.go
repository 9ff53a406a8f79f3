//go:build !linux && !windows

package engine

import (
	"fmt"
	"os"
	"syscall"
)

// statKey identifies a file's content and metadata state (see statkey_linux.go).
func statKey(path string, fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s\x00%d:%d:%d:%d:%d", path, st.Dev, st.Ino, st.Size, st.Mtimespec.Nano(), st.Ctimespec.Nano())
}

package engine

import (
	"fmt"
	"os"
	"syscall"
)

// statKey identifies a file's content and metadata state (identity, size,
// mtime, ctime): a cached answer about it is stale once this changes.
func statKey(path string, fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s\x00%d:%d:%d:%d:%d", path, st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano())
}

package engine

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// idOf is the file's volume serial and file index (Windows' inode).
func idOf(path string) (fileID, bool) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return fileID{}, false
	}
	h, err := windows.CreateFile(p, 0, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return fileID{}, false
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if windows.GetFileInformationByHandle(h, &info) != nil {
		return fileID{}, false
	}
	return fileID{uint64(info.VolumeSerialNumber), uint64(info.FileIndexHigh)<<32 | uint64(info.FileIndexLow)}, true
}

// ownedSecurely has no owner and mode bits to check on Windows (ACLs rule
// there, and runs execute as the server's user anyway).
func ownedSecurely(p string) error {
	_, err := os.Lstat(p)
	return err
}

// statKey identifies a file's state by size and modification time.
func statKey(path string, fi os.FileInfo) string {
	return fmt.Sprintf("%s\x00%d:%d", path, fi.Size(), fi.ModTime().UnixNano())
}

// privateFile: no owner and mode bits to check on Windows (ACLs rule
// there); a regular file is taken as the server's own.
func privateFile(path string, fi os.FileInfo) bool { return fi.Mode().IsRegular() }

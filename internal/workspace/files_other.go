//go:build !linux

package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
)

// The files operations walk the workspace with openat2 and write with
// renameat2; off Linux they are not offered (runs there execute as the
// server, with no confinement to hold the operations to).
var errFilesNeedLinux = fmt.Errorf("the workspace files operations need Linux (this server runs on %s): %w", runtime.GOOS, errors.ErrUnsupported)

// Stat is not available off Linux.
func (r *Root) Stat(p string, w Rights) (FileInfo, error) { return FileInfo{}, errFilesNeedLinux }

// OpenFile is not available off Linux.
func (r *Root) OpenFile(p string, w Rights) (*os.File, FileInfo, error) {
	return nil, FileInfo{}, errFilesNeedLinux
}

// ReadAt is not available off Linux.
func (r *Root) ReadAt(p string, w Rights, off, length int64) ([]byte, FileInfo, error) {
	return nil, FileInfo{}, errFilesNeedLinux
}

// WriteFile is not available off Linux.
func (r *Root) WriteFile(p string, w Rights, src io.Reader, o WriteOptions) (FileInfo, error) {
	return FileInfo{}, errFilesNeedLinux
}

// Delete is not available off Linux.
func (r *Root) Delete(p string, w Rights) error { return errFilesNeedLinux }

// List is not available off Linux.
func (r *Root) List(p string, w Rights, o ListOptions) ([]FileInfo, bool, error) {
	return nil, false, errFilesNeedLinux
}

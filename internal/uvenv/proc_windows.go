package uvenv

import (
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// killTreeOnCancel kills uv when its context ends (the default). uv on
// Windows runs its interpreters as children that exit with it.
func killTreeOnCancel(cmd *exec.Cmd) {}

// lowerPriority makes a background job (sealing an env) yield to runs.
func lowerPriority(pid int) {
	h, err := windows.OpenProcess(windows.PROCESS_SET_INFORMATION, false, uint32(pid))
	if err != nil {
		return
	}
	defer windows.CloseHandle(h)
	_ = windows.SetPriorityClass(h, windows.BELOW_NORMAL_PRIORITY_CLASS)
}

// VenvPython is the interpreter of the virtual environment at dir.
func VenvPython(dir string) string { return filepath.Join(dir, "Scripts", "python.exe") }

// oNoFollow: with O_EXCL, Windows' CreateFile(CREATE_NEW) never follows a
// link in the last component either.
const oNoFollow = 0

// linkCount: confined builds are Linux-only, so adopt never runs on
// Windows; every file counts as singly linked.
func linkCount(fi os.FileInfo) (uint64, bool) { return 1, true }

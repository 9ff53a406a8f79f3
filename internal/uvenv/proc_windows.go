package uvenv

import (
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

//go:build !linux

package proc

import (
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// marked asks ps (or, on Windows, the process table through PowerShell)
// for every process's command line.
func marked(mark string) []int {
	cmd := exec.Command("ps", "-A", "-o", "pid=", "-o", "args=")
	if runtime.GOOS == "windows" {
		cmd = exec.Command("powershell", "-NoProfile", "-Command",
			"Get-CimInstance Win32_Process | ForEach-Object { \"$($_.ProcessId) $($_.CommandLine)\" }")
	}
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, line := range strings.Split(string(out), "\n") {
		pidText, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		if pid, err := strconv.Atoi(pidText); err == nil && strings.Contains(rest, mark) {
			pids = append(pids, pid)
		}
	}
	return pids
}

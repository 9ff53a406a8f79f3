package proc

import "golang.org/x/sys/windows"

// stillActive is GetExitCodeProcess's STILL_ACTIVE.
const stillActive = 259

func gone(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return true
	}
	defer windows.CloseHandle(h)
	var code uint32
	return windows.GetExitCodeProcess(h, &code) == nil && code != stillActive
}

package sandbox

import "golang.org/x/sys/unix"

// legacyModeRules are x86_64's path-based calls that take a mode (arm64
// has only the *at forms).
var legacyModeRules = []modeRule{
	{nr: unix.SYS_CHMOD, mode: 1, flags: -1},
	{nr: unix.SYS_OPEN, mode: 2, flags: 1},
	{nr: unix.SYS_CREAT, mode: 1, flags: -1},
	{nr: unix.SYS_MKDIR, mode: 1, flags: -1},
	{nr: unix.SYS_MKNOD, mode: 1, flags: -1, device: true},
}

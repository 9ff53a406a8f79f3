//go:build !linux && !darwin && !windows

package cli

const treeKill = "killed on timeout/cancel as a process group (TERM, grace, KILL)"

const offLinux = `pyexec cannot confine runs on this system (its confinement is Linux): use --sandbox none, or the container image.`

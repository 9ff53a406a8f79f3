// Package proc answers, for tests on every platform, whether a process is
// gone, and finds a run's processes by a mark in their command line.
package proc

// Gone reports whether no process with this pid exists any more.
func Gone(pid int) bool { return gone(pid) }

//go:build !linux

package launcher

// MaybeRun does nothing off Linux: there is no re-executed launcher there.
// Start runs Python directly in a process tree the server controls (a
// process group on macOS, a Job Object on Windows), since the launcher's
// job on Linux, applying the sandbox between fork and exec and reaping as a
// subreaper, has no equivalent to apply.
func MaybeRun() {}

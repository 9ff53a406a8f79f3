package sandbox

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// applyRlimits sets the run's rlimits on the launcher process; Python
// inherits them at fork. Rlimits are per process, not per thread, so they
// cannot be confined to the starter thread: the launcher must not start
// anything but the run afterwards. They are harmless to the launcher itself
// (NPROC is ignored for root, FSIZE does not apply to pipes, NOFILE is not
// retroactive, CPU counts only the launcher's own tiny usage).
//
//   - RLIMIT_NPROC caps processes+threads of the run's uid (only meaningful
//     for an unprivileged run-as uid; root ignores it; and it counts every
//     process of that uid on the machine, so the pids cgroup is the real cap).
//   - RLIMIT_FSIZE: writes beyond the cap fail with EFBIG (Python ignores
//     SIGXFSZ, so it sees OSError [Errno 27] File too large).
//   - RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL one second later.
//   - RLIMIT_AS only when there is no memory cgroup (asAlso): a virtual
//     memory cap is a poor stand-in for RSS but stops a memory bomb. Never
//     on the launcher itself (the Go runtime aborts when mmap fails): Start
//     sets it on Python with prlimit instead.
func applyRlimits(lim Limits, nproc, asAlso bool) error {
	var errs []error
	set := func(name string, res int, soft, hard uint64) {
		// syscall.Setrlimit (not unix.) so that, for NOFILE, Go stops
		// restoring its startup soft limit in children.
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: soft, Max: hard}); err != nil {
			errs = append(errs, fmt.Errorf("setrlimit %s=%d: %w", name, soft, err))
		}
	}
	if lim.OpenFiles > 0 {
		set("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, uint64(lim.OpenFiles), uint64(lim.OpenFiles))
	}
	if lim.FileSizeBytes > 0 {
		set("RLIMIT_FSIZE", unix.RLIMIT_FSIZE, uint64(lim.FileSizeBytes), uint64(lim.FileSizeBytes))
	}
	if lim.CPUSeconds > 0 {
		set("RLIMIT_CPU", unix.RLIMIT_CPU, uint64(lim.CPUSeconds), uint64(lim.CPUSeconds)+1)
	}
	if nproc && lim.MaxProcs > 0 {
		set("RLIMIT_NPROC", unix.RLIMIT_NPROC, uint64(lim.MaxProcs), uint64(lim.MaxProcs))
	}
	if asAlso && lim.MemoryBytes > 0 {
		set("RLIMIT_AS", unix.RLIMIT_AS, uint64(lim.MemoryBytes), uint64(lim.MemoryBytes))
	}
	return errors.Join(errs...)
}

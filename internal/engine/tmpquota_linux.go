package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/launcher"
)

// quotaPrefix names the per-server mount points beneath the state dir's
// tmp/: each server has its own ("q<pid>-..."), so two servers sharing a
// state dir never mount over each other's runs.
const quotaPrefix = "q"

// tmpQuotaInodes bounds the files and directories all runs' temp dirs hold.
const tmpQuotaInodes = 1 << 20

// newTmpQuota mounts a tmpfs of limit bytes for the runs' temp dirs beneath
// root. Its pages are charged to the memory cgroup of the run that writes
// them, so a run's temp files also count against its own memory limit, and
// all runs together hold at most limit. Without root (or with limit < 0) the
// temp dirs stay on the state dir's filesystem, and note says so.
func newTmpQuota(root string, limit int64, exe string) (*tmpQuota, error) {
	plain := func(note string) (*tmpQuota, error) {
		return &tmpQuota{dir: root, note: note, release: func() error { return nil }}, nil
	}
	if limit < 0 {
		return plain("run temp dirs are not capped in total (--tmp-limit -1)")
	}
	if os.Geteuid() != 0 {
		return plain("run temp dirs are not capped in total (needs root to mount their filesystem); each file is capped by the file size limit")
	}
	if limit == 0 {
		limit = DefaultTmpLimit
	}
	removeStaleQuotas(root)
	dir, err := os.MkdirTemp(root, quotaPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("run temp dirs: %w", err)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755", limit, tmpQuotaInodes)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("run temp dirs: mount a %s tmpfs on %s: %w (pass --tmp-limit -1 to keep them on the state dir's disk, uncapped)", FormatBytes(limit), dir, err)
	}
	// Unmounted by Close, and by the watcher when the server dies without
	// closing (SIGKILL): its memory is not held past the server.
	stopWatch, err := launcher.StartUnmountOnExit(exe, dir)
	if err != nil {
		launcher.UnmountAll(dir)
		return nil, fmt.Errorf("run temp dirs: %w", err)
	}
	return &tmpQuota{dir: dir, limit: limit, release: func() error {
		return errors.Join(launcher.UnmountAll(dir), stopWatch())
	}}, nil
}

// removeStaleQuotas unmounts and removes the temp dir filesystems of
// servers that died without closing (their pid is gone): their runs are
// over, and their memory is held until the mount goes.
func removeStaleQuotas(root string) {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), quotaPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(name, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if err := unix.Kill(pid, 0); err == nil || errors.Is(err, unix.EPERM) {
			continue // its server still runs
		}
		launcher.UnmountAll(filepath.Join(root, e.Name()))
	}
}

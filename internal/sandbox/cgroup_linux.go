package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A run's cgroup is created next to (as a child of) the cgroup the launcher
// is in, named "pyexec-<run id>". Nesting under our own cgroup keeps every
// run inside whatever limits and accounting the operator (systemd, a
// container runtime, a CI harness) placed on the server, and a flat name
// means nothing but the run's own directory is ever created or removed.
//
// cgroup v1 (what these machines have): the memory and pids controllers are
// separate hierarchies. The child must be born inside both, or a fork bomb
// could fork before being moved; Go's SysProcAttr.UseCgroupFD is v2-only, so
// the launcher moves its locked starter thread (v1 "tasks" takes thread ids)
// into the run's cgroups, forks Python from that thread, and moves the thread
// back. cgroup v2 (when delegated): clone3(CLONE_INTO_CGROUP) via UseCgroupFD.

const cgroupPrefix = "pyexec-"

// cgroupStats is what a finished run's cgroup tells about it.
type cgroupStats struct {
	PeakMemoryBytes int64
	OOMKills        int64
	PidsMaxHits     int64
	PeakPids        int64
}

type cgroup struct {
	mode string // "v1" or "v2"
	// v1: one directory per controller, and the directories the starter
	// thread came from (to move it back).
	memDir, pidsDir         string
	origMemDir, origPidsDir string
	// v2
	dir string
	fd  int
}

// cgroupLocation finds where the run cgroups can be made. It returns mode
// "v1" with the memory and pids parent dirs, or "v2" with one parent dir.
func cgroupLocation() (mode, memParent, pidsParent string, err error) {
	self, err := readSelfCgroups()
	if err != nil {
		return "", "", "", err
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return "", "", "", err
	}
	var v1errs []string
	mem, okm := mounts["memory"]
	pids, okp := mounts["pids"]
	if okm && okp {
		mp := filepath.Join(mem.point, strings.TrimPrefix(self["memory"], mem.root))
		pp := filepath.Join(pids.point, strings.TrimPrefix(self["pids"], pids.root))
		if err1, err2 := unix.Access(mp, unix.W_OK), unix.Access(pp, unix.W_OK); err1 == nil && err2 == nil {
			return "v1", mp, pp, nil
		} else {
			v1errs = append(v1errs, fmt.Sprintf("v1 memory %s / pids %s not writable", mp, pp))
		}
	} else {
		v1errs = append(v1errs, "no v1 memory+pids hierarchies")
	}
	if u, ok := mounts[""]; ok {
		dir := filepath.Join(u.point, strings.TrimPrefix(self[""], u.root))
		ctrl, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		have := strings.Fields(string(ctrl))
		if contains(have, "memory") && contains(have, "pids") && unix.Access(dir, unix.W_OK) == nil {
			return "v2", dir, dir, nil
		}
		v1errs = append(v1errs, fmt.Sprintf("v2 cgroup %s has controllers %q (needs memory and pids delegated)", dir, strings.TrimSpace(string(ctrl))))
	}
	return "", "", "", errors.New(strings.Join(v1errs, "; "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// readSelfCgroups maps controller name ("" for the v2 hierarchy) to the
// cgroup path of the calling process.
func readSelfCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read own cgroups: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

type cgMount struct{ point, root string }

// cgroupMounts maps v1 controller names, and "" for cgroup2, to mounts.
func cgroupMounts() (map[string]cgMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	out := map[string]cgMount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		m := cgMount{point: pf[4], root: pf[3]}
		switch qf[0] {
		case "cgroup2":
			if _, dup := out[""]; !dup {
				out[""] = m
			}
		case "cgroup":
			for _, opt := range strings.Split(qf[2], ",") {
				if opt == "memory" || opt == "pids" {
					out[opt] = m
				}
			}
		}
	}
	return out, sc.Err()
}

// detectCgroup reports whether per-run cgroups can be created, by creating
// and removing a probe.
func detectCgroup() (Mechanism, string) {
	m := Mechanism{Name: "cgroup"}
	mode, mp, pp, err := cgroupLocation()
	if err != nil {
		m.Detail = "no per-run cgroup: " + err.Error() + " (memory falls back to RLIMIT_AS, processes to RLIMIT_NPROC)"
		return m, ""
	}
	probe := cgroupPrefix + "probe-" + strconv.Itoa(os.Getpid())
	for _, p := range uniq(mp, pp) {
		d := filepath.Join(p, probe)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			m.Detail = fmt.Sprintf("cannot create cgroups under %s: %v", p, err)
			return m, ""
		}
		_ = os.Remove(d)
	}
	m.Available = true
	if mode == "v1" {
		m.Detail = fmt.Sprintf("v1: per-run memory cgroup under %s and pids cgroup under %s (memory cap, peak, OOM detection, process cap, kill all)", mp, pp)
	} else {
		m.Detail = fmt.Sprintf("v2: per-run cgroup under %s (memory cap, peak, OOM detection, process cap, cgroup.kill)", mp)
	}
	return m, mode
}

func uniq(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// newCgroup creates the run's cgroup(s) and writes the limits.
func newCgroup(runID string, lim Limits) (*cgroup, error) {
	mode, mp, pp, err := cgroupLocation()
	if err != nil {
		return nil, err
	}
	return newCgroupAt(mode, mp, pp, runID, lim)
}

// newCgroupAt is newCgroup under parents already located (cgroupLocation).
func newCgroupAt(mode, mp, pp, runID string, lim Limits) (*cgroup, error) {
	name := cgroupPrefix + runID
	c := &cgroup{mode: mode, fd: -1}
	switch mode {
	case "v1":
		c.memDir, c.pidsDir = filepath.Join(mp, name), filepath.Join(pp, name)
		c.origMemDir, c.origPidsDir = mp, pp
		if err := os.Mkdir(c.memDir, 0o755); err != nil {
			return nil, fmt.Errorf("create memory cgroup: %w", err)
		}
		if err := os.Mkdir(c.pidsDir, 0o755); err != nil {
			_ = os.Remove(c.memDir)
			return nil, fmt.Errorf("create pids cgroup: %w", err)
		}
		var errs []error
		if lim.MemoryBytes > 0 {
			errs = append(errs, writeFile(c.memDir, "memory.limit_in_bytes", strconv.FormatInt(lim.MemoryBytes, 10)))
			// Swap would let a run exceed its cap silently; memsw exists only
			// when swap accounting is on, so its absence is fine.
			_ = writeFile(c.memDir, "memory.memsw.limit_in_bytes", strconv.FormatInt(lim.MemoryBytes, 10))
		}
		if lim.MaxProcs > 0 {
			errs = append(errs, writeFile(c.pidsDir, "pids.max", strconv.FormatInt(lim.MaxProcs, 10)))
		}
		if err := errors.Join(errs...); err != nil {
			_ = c.remove()
			return nil, err
		}
	case "v2":
		// Controllers must be enabled for children of the parent.
		_ = writeFile(mp, "cgroup.subtree_control", "+memory +pids")
		c.dir = filepath.Join(mp, name)
		if err := os.Mkdir(c.dir, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
		var errs []error
		if lim.MemoryBytes > 0 {
			errs = append(errs, writeFile(c.dir, "memory.max", strconv.FormatInt(lim.MemoryBytes, 10)))
			_ = writeFile(c.dir, "memory.swap.max", "0")
		}
		if lim.MaxProcs > 0 {
			errs = append(errs, writeFile(c.dir, "pids.max", strconv.FormatInt(lim.MaxProcs, 10)))
		}
		fd, err := unix.Open(c.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		errs = append(errs, err)
		c.fd = fd
		if err := errors.Join(errs...); err != nil {
			_ = c.remove()
			return nil, err
		}
	}
	return c, nil
}

func writeFile(dir, name, val string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(val), 0); err != nil {
		return fmt.Errorf("cgroup %s: %w", name, err)
	}
	return nil
}

// joinThread moves the calling (locked) thread into the v1 cgroups so the
// child it forks is born there. No-op for v2 (UseCgroupFD does it).
func (c *cgroup) joinThread() error {
	if c.mode != "v1" {
		return nil
	}
	// "0" means the writing thread itself. For a thread moving itself the
	// kernel skips the global threadgroup lock, whose write side costs an
	// RCU grace period (milliseconds) per migration.
	if err := writeFile(c.memDir, "tasks", "0"); err != nil {
		return err
	}
	return writeFile(c.pidsDir, "tasks", "0")
}

// leaveThread moves the starter thread back where it came from, so it is
// neither counted nor killed with the run.
func (c *cgroup) leaveThread() error {
	if c.mode != "v1" {
		return nil
	}
	return errors.Join(writeFile(c.origMemDir, "tasks", "0"), writeFile(c.origPidsDir, "tasks", "0"))
}

// procsFile is the file listing every process of the run.
func (c *cgroup) procsFile() string {
	if c.mode == "v1" {
		return filepath.Join(c.pidsDir, "cgroup.procs")
	}
	return filepath.Join(c.dir, "cgroup.procs")
}

// pids lists the processes currently in the run's cgroup.
func (c *cgroup) pids() []int {
	b, err := os.ReadFile(c.procsFile())
	if err != nil {
		return nil
	}
	var out []int
	self := os.Getpid()
	for _, f := range strings.Fields(string(b)) {
		// The launcher's starter thread is briefly in the cgroup; v1 lists
		// its thread group (the launcher) then: never kill ourselves.
		if n, err := strconv.Atoi(f); err == nil && n != self {
			out = append(out, n)
		}
	}
	return out
}

// signal sends sig to every process of the run (including ones that called
// setsid or were reparented). For SIGKILL it first forbids new forks so a
// fork bomb cannot outrun the loop.
func (c *cgroup) signal(sig syscall.Signal) {
	if c.mode == "v2" && sig == syscall.SIGKILL {
		if writeFile(c.dir, "cgroup.kill", "1") == nil {
			return
		}
	}
	if sig == syscall.SIGKILL {
		if c.mode == "v1" {
			_ = writeFile(c.pidsDir, "pids.max", "0")
		} else {
			_ = writeFile(c.dir, "pids.max", "0")
		}
	}
	for _, pid := range c.pids() {
		_ = syscall.Kill(pid, sig)
	}
}

// killAll kills every process of the run and waits (bounded) until the
// cgroup is empty.
func (c *cgroup) killAll() {
	if len(c.pids()) == 0 {
		return // the usual case: the launcher or supervisor reaped everything
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		c.signal(syscall.SIGKILL)
		if len(c.pids()) == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func readInt(dir, name string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0
	}
	return parseInt(b)
}

// readKeyed reads "key value" lines (memory.oom_control, pids.events, ...).
func readKeyed(dir, name, key string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0
	}
	return parseKeyed(b, key)
}

func parseInt(b []byte) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

func parseKeyed(b []byte, key string) int64 {
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// evidenceFiles are the files a finished run's cgroup is read from, by
// mode, as {directory (memory or pids, for v1), name}: peak memory, OOM
// kills, process cap hits, peak processes.
var evidenceFiles = map[string][4][2]string{
	"v1": {{"mem", "memory.max_usage_in_bytes"}, {"mem", "memory.oom_control"}, {"pids", "pids.events"}, {"pids", "pids.peak"}},
	"v2": {{"", "memory.peak"}, {"", "memory.events"}, {"", "pids.events"}, {"", "pids.peak"}},
}

// evidencePath is where one of evidenceFiles is.
func (c *cgroup) evidencePath(f [2]string) string {
	switch f[0] {
	case "mem":
		return filepath.Join(c.memDir, f[1])
	case "pids":
		return filepath.Join(c.pidsDir, f[1])
	}
	return filepath.Join(c.dir, f[1])
}

// parseStats makes cgroupStats of evidenceFiles' contents.
func parseStats(b [4][]byte) cgroupStats {
	return cgroupStats{
		PeakMemoryBytes: parseInt(b[0]),
		OOMKills:        parseKeyed(b[1], "oom_kill"),
		PidsMaxHits:     parseKeyed(b[2], "max"),
		PeakPids:        parseInt(b[3]),
	}
}

func (c *cgroup) stats() cgroupStats {
	var b [4][]byte
	for i, f := range evidenceFiles[c.mode] {
		b[i], _ = os.ReadFile(c.evidencePath(f))
	}
	return parseStats(b)
}

// remove kills what is left and removes the run's cgroup directories.
// rmdir can fail with EBUSY for a moment after the last task exited.
func (c *cgroup) remove() error {
	if c.fd >= 0 {
		_ = unix.Close(c.fd)
		c.fd = -1
	}
	var dirs []string
	if c.mode == "v1" {
		dirs = []string{c.memDir, c.pidsDir}
	} else {
		dirs = []string{c.dir}
	}
	var errs []error
	for _, d := range dirs {
		if d == "" {
			continue
		}
		var err error
		for i := 0; i < 200; i++ {
			err = os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Cleanup kills whatever is left in a run's cgroups and removes them. The
// server calls it when a launcher died without reporting (it was SIGKILLed
// before Finish ran), so no cgroup outlives its run. It is a no-op when the
// run has no cgroup left.
func Cleanup(runID string) error {
	mode, mp, pp, err := cgroupLocation()
	if err != nil {
		return nil
	}
	name := cgroupPrefix + runID
	c := &cgroup{mode: mode, fd: -1}
	if mode == "v1" {
		c.memDir, c.pidsDir = filepath.Join(mp, name), filepath.Join(pp, name)
	} else {
		c.dir = filepath.Join(mp, name)
	}
	exists := false
	for _, d := range []string{c.memDir, c.pidsDir, c.dir} {
		if d != "" {
			if _, err := os.Stat(d); err == nil {
				exists = true
			}
		}
	}
	if !exists {
		return nil
	}
	c.killAll()
	return c.remove()
}

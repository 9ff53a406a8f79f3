package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A warm run's cgroup, made ahead.
//
// Making a run's cgroup (v1: a memory and a pids directory, their limits,
// and opening the files the fork joins them by) costs about a third of a
// millisecond, which on the warm path is a twentieth of a run. So the
// server keeps a few made ahead, with the limits the last runs had, and a
// run takes one whose limits are its own (or has one made for it, as
// before, when none matches). A spare cgroup is fresh: made for one run,
// never joined before it is handed out, and removed with that run (never
// handed out twice), so what it tells after the run (peak memory, peak
// processes, OOM kills, process cap hits) is that run's alone. The files
// that evidence is read from are opened with it, so a finished run's
// evidence costs one read per file. A spare keeps its name (it names the
// server) through an ordinary run, which is over in moments; a
// long-lived run's (a session's) is renamed for it, as one made for it
// would be named, where cgroup v1 can rename (a rename costs a tenth of a
// millisecond: the kernel's cgroup lock).

// warmCgroup is a cgroup ready for a warm run: limits written, the files
// the fork joins it by and the files its evidence is read from open.
type warmCgroup struct {
	cg       *cgroup
	join     []*os.File // the fork writes "0" to each (then the server closes its copies)
	evidence [4]int     // evidenceFiles, open for reading; -1 when not open
}

// newWarmCgroup makes the cgroup named cgroupPrefix+id under loc.
func newWarmCgroup(loc cgroupLoc, id string, lim Limits) (*warmCgroup, error) {
	cg, err := newCgroupAt(loc.mode, loc.mem, loc.pids, id, lim)
	if err != nil {
		return nil, err
	}
	w := &warmCgroup{cg: cg, evidence: [4]int{-1, -1, -1, -1}}
	names := []string{filepath.Join(cg.memDir, "tasks"), filepath.Join(cg.pidsDir, "tasks")}
	if cg.mode == "v2" {
		names = []string{filepath.Join(cg.dir, "cgroup.procs")}
	}
	for _, n := range names {
		f, err := os.OpenFile(n, os.O_WRONLY, 0)
		if err != nil {
			_ = w.close()
			return nil, fmt.Errorf("open %s: %w", n, err)
		}
		w.join = append(w.join, f)
	}
	for i, f := range evidenceFiles[cg.mode] {
		// A file this kernel lacks (pids.peak before 6.1) reads as 0, as
		// it did when read by name.
		if fd, err := unix.Open(cg.evidencePath(f), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			w.evidence[i] = fd
		}
	}
	return w, nil
}

// stats reads the run's evidence from the files opened with the cgroup.
func (w *warmCgroup) stats() cgroupStats {
	var b [4][]byte
	buf := make([]byte, 4*512)
	for i, fd := range w.evidence {
		if fd < 0 {
			continue
		}
		chunk := buf[i*512 : (i+1)*512]
		if n, err := unix.Pread(fd, chunk, 0); err == nil {
			b[i] = chunk[:n]
		}
	}
	return parseStats(b)
}

// rename gives the cgroup the name a run's cgroup has (cgroupPrefix+id),
// so that a spare handed out is named like one made for the run. cgroup
// v1 renames within a parent; v2 cannot, and a spare keeps its name.
func (w *warmCgroup) rename(id string) {
	name := cgroupPrefix + id
	for _, d := range []*string{&w.cg.memDir, &w.cg.pidsDir, &w.cg.dir} {
		if *d == "" || filepath.Base(*d) == name {
			continue
		}
		to := filepath.Join(filepath.Dir(*d), name)
		if os.Rename(*d, to) != nil {
			return
		}
		*d = to
	}
}

// releaseJoin closes the server's copies of the join files.
func (w *warmCgroup) releaseJoin() {
	for _, f := range w.join {
		f.Close()
	}
	w.join = nil
}

// close kills what is left in the cgroup and removes it.
func (w *warmCgroup) close() error {
	w.releaseJoin()
	for i, fd := range w.evidence {
		if fd >= 0 {
			unix.Close(fd)
			w.evidence[i] = -1
		}
	}
	w.cg.killAll()
	return w.cg.remove()
}

// stockKey is what a spare cgroup must match to be a run's: its limits.
type stockKey struct{ memory, procs int64 }

const (
	// stockDepth is how many spare cgroups are kept per set of limits:
	// two, so that two runs at once (one per CPU here) both find one.
	stockDepth = 2
	// stockKeys is how many sets of limits have spares at once; the one
	// asked for least recently loses its spares beyond that.
	stockKeys = 4
)

// cgroupStock is one server's spare cgroups.
type cgroupStock struct {
	mu      sync.Mutex
	spares  map[stockKey][]*warmCgroup
	recent  []stockKey // keys with spares (or being filled), most recently asked for last
	filling map[stockKey]int
	closed  bool
	seq     uint64
	pidns   uint64         // this process's PID namespace, in the spares' names
	work    sync.WaitGroup // fills and removals in flight
}

// take hands out a spare cgroup with limits lim (nil when there is none),
// renamed for run id unless id is empty, and has the stock for lim
// refilled in the background. tag names the spares (see Warm.SpareTag).
func (s *cgroupStock) take(loc cgroupLoc, tag string, lim Limits, id string) *warmCgroup {
	key := stockKey{lim.MemoryBytes, lim.MaxProcs}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	var got *warmCgroup
	if l := s.spares[key]; len(l) > 0 {
		got = l[len(l)-1]
		s.spares[key] = l[:len(l)-1]
	}
	s.mu.Unlock()
	// Renamed before the refill starts: both take the kernel's cgroup
	// lock, and the refill's mkdir holds it for a while.
	if got != nil && id != "" {
		got.rename(id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.refillLocked(loc, tag, key, lim)
	}
	return got
}

// refillLocked starts making what key lacks, and makes key the most
// recently asked for (s.mu held).
func (s *cgroupStock) refillLocked(loc cgroupLoc, tag string, key stockKey, lim Limits) {
	if s.spares == nil {
		s.spares, s.filling = map[stockKey][]*warmCgroup{}, map[stockKey]int{}
	}
	s.recent = append(slices.DeleteFunc(s.recent, func(k stockKey) bool { return k == key }), key)
	for len(s.recent) > stockKeys {
		old := s.recent[0]
		s.recent = s.recent[1:]
		s.discardLocked(s.spares[old])
		delete(s.spares, old)
	}
	need := stockDepth - len(s.spares[key]) - s.filling[key]
	if need <= 0 {
		return
	}
	s.filling[key] += need
	if s.pidns == 0 {
		s.pidns = ownPidNS()
	}
	ids := make([]string, need)
	for i := range ids {
		s.seq++
		ids[i] = spareID(tag, s.pidns, os.Getpid(), s.seq)
	}
	s.work.Add(1)
	go func() {
		defer s.work.Done()
		for i, id := range ids {
			c, err := newWarmCgroup(loc, id, lim)
			s.mu.Lock()
			s.filling[key]--
			wanted := err == nil && !s.closed && slices.Contains(s.recent, key)
			if wanted {
				s.spares[key] = append(s.spares[key], c)
			}
			if err != nil {
				// Runs make their own, as without spares; the rest of
				// this fill would fail the same way.
				s.filling[key] -= len(ids) - i - 1
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
			if !wanted {
				_ = c.close()
			}
		}
	}()
}

// spareID names a spare cgroup: by the server's tag, its PID namespace and
// pid (a spare whose server is gone is removed by the next server:
// sweepSpares) and a number.
func spareID(tag string, pidns uint64, pid int, n uint64) string {
	return "spare-" + tag + "-" + strconv.FormatUint(pidns, 10) + "-" + strconv.Itoa(pid) + "-" + strconv.FormatUint(n, 10)
}

// ownPidNS is the inode of this process's PID namespace (0 if unknown).
func ownPidNS() uint64 {
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
}

// sweepSpares removes the spare cgroups under loc that a server killed
// before its Close left behind: any server's, when its pid is gone from
// this PID namespace, which must be the one it named (a pid of another
// namespace says nothing here). Only an empty cgroup can be removed, and a
// spare is empty until it is handed out.
func sweepSpares(loc cgroupLoc) {
	ns := ownPidNS()
	if ns == 0 {
		return
	}
	for _, parent := range uniq(loc.mem, loc.pids) {
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), cgroupPrefix+"spare-") {
				continue
			}
			f := strings.Split(e.Name(), "-")
			if len(f) < 5 {
				continue
			}
			pidns, err1 := strconv.ParseUint(f[len(f)-3], 10, 64)
			pid, err2 := strconv.Atoi(f[len(f)-2])
			if err1 != nil || err2 != nil || pidns != ns || pid <= 0 || pid == os.Getpid() || unix.Kill(pid, 0) != unix.ESRCH {
				continue
			}
			_ = unix.Rmdir(filepath.Join(parent, e.Name()))
		}
	}
}

// discardLocked removes cgroups in the background (s.mu held).
func (s *cgroupStock) discardLocked(l []*warmCgroup) {
	if len(l) == 0 {
		return
	}
	s.work.Add(1)
	go func() {
		defer s.work.Done()
		for _, c := range l {
			_ = c.close()
		}
	}()
}

// names lists the spare cgroups' directories.
func (s *cgroupStock) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.spares {
		for _, c := range l {
			out = append(out, c.cg.memDir, c.cg.pidsDir, c.cg.dir)
		}
	}
	return slices.DeleteFunc(out, func(d string) bool { return d == "" })
}

// close removes every spare once the fills in flight are done; later
// takes find none and start none.
func (s *cgroupStock) close() error {
	s.mu.Lock()
	s.closed = true
	var all []*warmCgroup
	for _, l := range s.spares {
		all = append(all, l...)
	}
	s.spares = nil
	s.mu.Unlock()
	s.work.Wait()
	var errs []error
	for _, c := range all {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// stockFor is a stock of spare cgroups tagged for this test, and where
// they are made.
func stockFor(t *testing.T) (*cgroupStock, cgroupLoc, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	var loc cgroupLoc
	var err error
	if loc.mode, loc.mem, loc.pids, err = cgroupLocation(); err != nil {
		t.Skip(err)
	}
	tag := fmt.Sprintf("test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	s := &cgroupStock{}
	t.Cleanup(func() {
		_ = s.close()
		noCgroupLeftFor(t, "spare-"+tag+"-")
	})
	return s, loc, tag
}

func cgroupFile(t *testing.T, c *warmCgroup, ctl, name string) string {
	t.Helper()
	dir := c.cg.dir
	if c.cg.mode == "v1" {
		dir = c.cg.memDir
		if ctl == "pids" {
			dir = c.cg.pidsDir
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A spare cgroup is fresh (no process has ever been in it, no peak) and
// has the limits it was asked for; one with other limits is never handed
// out; a spare is handed out once.
func TestCgroupStock(t *testing.T) {
	s, loc, tag := stockFor(t)
	lim := Limits{MemoryBytes: 96 << 20, MaxProcs: 17}
	other := Limits{MemoryBytes: 64 << 20, MaxProcs: 17}
	if c := s.take(loc, tag, lim, "spare-"+tag+"-taken"); c != nil {
		t.Fatal("an empty stock handed out a cgroup")
	}
	s.work.Wait()
	if n := len(s.spares[stockKey{lim.MemoryBytes, lim.MaxProcs}]); n != stockDepth {
		t.Fatalf("%d spares made, want %d", n, stockDepth)
	}
	seen := map[*warmCgroup]bool{}
	for i := 0; i < 2*stockDepth; i++ {
		c := s.take(loc, tag, lim, "spare-"+tag+"-taken")
		if c == nil {
			s.work.Wait() // refilled in the background
			if c = s.take(loc, tag, lim, "spare-"+tag+"-taken"); c == nil {
				t.Fatal("no spare after the refill")
			}
		}
		if seen[c] {
			t.Fatal("a spare was handed out twice")
		}
		if d := c.cg.pidsDir; c.cg.mode == "v1" && filepath.Base(d) != cgroupPrefix+"spare-"+tag+"-taken" { // v2 cannot rename
			t.Errorf("handed out as %s, not named for its run", d)
		}
		seen[c] = true
		memLimit, pidsLimit := "memory.limit_in_bytes", "pids.max"
		peak, procs := "memory.max_usage_in_bytes", "cgroup.procs"
		if c.cg.mode == "v2" {
			memLimit, peak = "memory.max", "memory.peak"
		}
		if got := cgroupFile(t, c, "memory", memLimit); got != strconv.FormatInt(lim.MemoryBytes, 10) {
			t.Errorf("memory limit %s, want %d", got, lim.MemoryBytes)
		}
		if got := cgroupFile(t, c, "pids", pidsLimit); got != "17" {
			t.Errorf("pids limit %s, want 17", got)
		}
		if got := cgroupFile(t, c, "pids", procs); got != "" {
			t.Errorf("a spare has processes: %q", got)
		}
		if got := cgroupFile(t, c, "memory", peak); got != "0" {
			t.Errorf("a spare has a peak: %s", got)
		}
		if st := c.stats(); st != (cgroupStats{}) {
			t.Errorf("a spare's evidence: %+v", st)
		}
		if len(c.join) == 0 {
			t.Error("no join files open")
		}
		if err := c.close(); err != nil {
			t.Error(err)
		}
	}
	// Other limits: no spare of lim fits; one with other's is made next.
	if c := s.take(loc, tag, other, "spare-"+tag+"-taken"); c != nil {
		t.Fatal("a spare with other limits was handed out")
	}
	s.work.Wait()
	c := s.take(loc, tag, other, "spare-"+tag+"-taken")
	if c == nil {
		t.Fatal("no spare with the other limits")
	}
	defer c.close()
	if got := cgroupFile(t, c, "memory", map[string]string{"v1": "memory.limit_in_bytes", "v2": "memory.max"}[c.cg.mode]); got != strconv.FormatInt(other.MemoryBytes, 10) {
		t.Errorf("memory limit %s, want %d", got, other.MemoryBytes)
	}
}

// Close removes every spare (their directories are gone) and the stock
// makes none after.
func TestCgroupStockClose(t *testing.T) {
	s, loc, tag := stockFor(t)
	for i := int64(0); i < stockKeys+2; i++ { // beyond stockKeys: the oldest lose theirs
		s.take(loc, tag, Limits{MemoryBytes: (64 + i) << 20, MaxProcs: 9}, "spare-"+tag+"-taken")
		s.work.Wait()
	}
	dirs := s.names()
	if len(dirs) != stockKeys*stockDepth*len(uniq(loc.mem, loc.pids)) {
		t.Errorf("%d spare dirs, want %d keys of %d", len(dirs), stockKeys, stockDepth)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("spare %s after Close: %v", d, err)
		}
	}
	if c := s.take(loc, tag, Limits{MemoryBytes: 64 << 20, MaxProcs: 9}, "spare-"+tag+"-taken"); c != nil {
		t.Error("a closed stock handed out a cgroup")
	}
	s.work.Wait()
	if n := len(s.names()); n != 0 {
		t.Errorf("a closed stock made %d spares", n)
	}
	noCgroupLeftFor(t, "spare-"+tag+"-")
}

// The evidence read through the files opened with the cgroup is what
// reading them by name tells, for a process that used memory in it.
func TestWarmCgroupEvidence(t *testing.T) {
	needPython(t)
	s, loc, tag := stockFor(t)
	s.take(loc, tag, Limits{MemoryBytes: 256 << 20, MaxProcs: 32}, "spare-"+tag+"-taken")
	s.work.Wait()
	c := s.take(loc, tag, Limits{MemoryBytes: 256 << 20, MaxProcs: 32}, "spare-"+tag+"-taken")
	if c == nil {
		t.Fatal("no spare")
	}
	// Handed out, it takes the run's name; what was opened still works.
	id := fmt.Sprintf("test-%d-evidence", os.Getpid())
	old := []string{c.cg.memDir, c.cg.pidsDir, c.cg.dir}
	c.rename(id)
	for _, d := range old {
		if _, err := os.Stat(d); d != "" && c.cg.mode == "v1" && !os.IsNotExist(err) {
			t.Errorf("%s still there after the rename: %v", d, err)
		}
	}
	defer noCgroupLeftFor(t, id)
	defer c.close()
	for _, d := range []string{c.cg.memDir, c.cg.pidsDir, c.cg.dir} {
		if d == "" {
			continue
		}
		if filepath.Base(d) != cgroupPrefix+id && c.cg.mode == "v1" {
			t.Errorf("renamed to %s, want %s", d, cgroupPrefix+id)
		}
		if _, err := os.Stat(d); err != nil {
			t.Error(err)
		}
	}
	cmd := exec.Command(python, "-c", "import sys; sys.stdin.read(1); b = bytearray(48 << 20); b[::4096] = b'x' * len(b[::4096])")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range c.join {
		if _, err := f.WriteString(strconv.Itoa(cmd.Process.Pid)); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal(err)
		}
	}
	in.Write([]byte("x"))
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	got, byName := c.stats(), c.cg.stats()
	if got != byName || got.PeakMemoryBytes < 48<<20 || got.PeakPids < 1 {
		t.Errorf("evidence %+v, by name %+v (want a peak of 48 MiB or more, 1 process or more)", got, byName)
	}
}

// The spares a killed server left are removed by the next server, whatever
// its tag; those of a live one (or of this process), and those named in
// another PID namespace, are not.
func TestSweepSpares(t *testing.T) {
	_, loc, tag := stockFor(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	ns := ownPidNS()
	if ns == 0 {
		t.Skip("no /proc/self/ns/pid")
	}
	cases := []struct {
		tag  string
		ns   uint64
		pid  int
		gone bool
	}{
		{tag, ns, dead.Process.Pid, true},
		{tag + "-other-server", ns, dead.Process.Pid, true},
		{tag, ns, 1, false},
		{tag, ns, os.Getpid(), false},
		{tag, ns + 1, dead.Process.Pid, false},
	}
	var made []string
	t.Cleanup(func() {
		for _, d := range made {
			os.Remove(d)
		}
	})
	for _, tc := range cases {
		for _, parent := range uniq(loc.mem, loc.pids) {
			d := filepath.Join(parent, cgroupPrefix+spareID(tc.tag, tc.ns, tc.pid, 1))
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			made = append(made, d)
		}
	}
	sweepSpares(loc)
	for i, tc := range cases {
		for _, parent := range uniq(loc.mem, loc.pids) {
			_, err := os.Stat(filepath.Join(parent, cgroupPrefix+spareID(tc.tag, tc.ns, tc.pid, 1)))
			if gone := os.IsNotExist(err); gone != tc.gone {
				t.Errorf("case %d (%+v) under %s: removed %v, want %v", i, tc, parent, gone, tc.gone)
			}
		}
	}
}

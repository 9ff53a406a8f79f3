package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Runs' temp dirs together hold at most --tmp-limit, cold and warm: a run
// filling its TMPDIR gets "No space left on device" while the state dir's
// disk stays untouched, and the server's filesystem goes when it closes.
func TestTmpLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the temp dir filesystem needs root")
	}
	const fill = `import os, tempfile
d = tempfile.gettempdir()
print(d.startswith(os.environ["TMPDIR"]))
try:
    with open(os.path.join(d, "big"), "wb") as f:
        for _ in range(MIB):
            f.write(b"x" * (1 << 20))
            f.flush()
    print("wrote MIB MiB")
except OSError as e:
    print("stopped:", e.strerror)
`
	for _, warm := range []int{0, 1} {
		t.Run(map[int]string{0: "cold", 1: "warm"}[warm], func(t *testing.T) {
			e, _ := newTestEngine(t, func(c *Config) {
				c.TmpLimit = 16 << 20
				c.Warm = WarmConfig{Spares: warm, wait: true}
			})
			if limit, note := e.TmpLimit(); limit != 16<<20 {
				t.Fatalf("TmpLimit = %d (%s), want 16 MiB", limit, note)
			}
			res := mustRun(t, e, Request{Code: strings.ReplaceAll(fill, "MIB", "64")})
			if want := "True\nstopped: No space left on device\n"; res.Stdout != want {
				t.Fatalf("stdout %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
			}
			// The next run has the whole limit again: the full one's dir is gone.
			e.settle()
			res = mustRun(t, e, Request{Code: strings.ReplaceAll(fill, "MIB", "12")})
			if want := "True\nwrote 12 MiB\n"; res.Stdout != want {
				t.Fatalf("a run after the full one: %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
			}
			if st := e.WarmStats(); warm > 0 && st.Warm != 2 {
				t.Fatalf("runs were not warm: %+v", st)
			}
			dir := e.tmpQuota.dir
			var st unix.Statfs_t
			if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
				t.Fatalf("run temp dirs on fs type %x (%v), want tmpfs", st.Type, err)
			}
			e.Close()
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("the temp dir filesystem %s is still there after Close: %v", dir, err)
			}
		})
	}
}

// A server that died without closing leaves its temp dir filesystem; the
// next one on the state dir unmounts and removes it, and leaves a live
// server's alone.
func TestStaleTmpQuota(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the temp dir filesystem needs root")
	}
	root := t.TempDir()
	dead := filepath.Join(root, "q999999999-1")
	live := filepath.Join(root, "q1-1") // init never dies
	for _, d := range []string{dead, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", dead, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	q, err := newTmpQuota(root, 1<<20, "")
	if err != nil {
		t.Fatal(err)
	}
	defer q.release()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		unix.Unmount(dead, unix.MNT_DETACH)
		t.Fatalf("a dead server's temp dirs are still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("a live server's temp dirs were removed: %v", err)
	}
}

package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNoSetIDFilesOnDisk runs the set-ID corpus script (every way to make a
// set-user-ID or set-group-ID file or a device node) in each workspace a run
// can write, for each identity a run can have, and checks on the host that
// nothing it left carries S_ISUID or S_ISGID or is a device: as nobody in a
// workspace it owns, as nobody through the idmapped mount of a root-owned
// workspace (where a setuid copy of python would land as a setuid-root
// binary), and as root without capabilities (--run-as none).
func TestNoSetIDFilesOnDisk(t *testing.T) {
	needPython(t)
	e := newEnv(t)
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "hostile", "setid_files.py"))
	if err != nil {
		t.Fatal(err)
	}
	rootWS := filepath.Join(e.base, "rootws")
	if err := os.Mkdir(rootWS, 0o755); err != nil {
		t.Fatal(err)
	}
	idmapped := IdmapAvailable(e.nobody, rootWS) == nil
	for _, c := range []struct {
		name   string
		policy Policy
		ws     string
		as     *Credential
	}{
		{"nobody-own-workspace", PolicyWorkspace, e.ws, e.nobody},
		{"nobody-idmapped-workspace", PolicyWorkspace, rootWS, e.nobody},
		{"nobody-idmapped-strict", PolicyStrict, rootWS, e.nobody},
		{"root-without-capabilities", PolicyWorkspace, rootWS, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.ws == rootWS && c.as != nil && !idmapped {
				t.Skip("no idmapped mounts here")
			}
			s := e.spec(c.policy)
			s.Workspace, s.RunAs = c.ws, c.as
			script := filepath.Join(c.ws, "setid_files.py")
			if err := os.WriteFile(script, src, 0o644); err != nil {
				t.Fatal(err)
			}
			res := sandboxed(t, s, 30*time.Second, python, "-S", script)
			if res.StartErr != "" || res.Exit != 0 {
				t.Fatalf("start=%q exit=%d stderr=%s", res.StartErr, res.Exit, res.Stderr)
			}
			for _, want := range []string{"DENIED chmod-4755 EPERM", "DENIED mknod-chr EPERM", "FIFO_OK", "NO_SETID", "MOUNT workspace nosuid nodev"} {
				if !strings.Contains(res.Stdout, want) {
					t.Errorf("missing %q in:\n%s", want, res.Stdout)
				}
			}
			if strings.Contains(res.Stdout, "MADE") {
				t.Errorf("an attempt succeeded:\n%s", res.Stdout)
			}
			probe := filepath.Join(c.ws, "setid-probe")
			n := 0
			err := filepath.WalkDir(probe, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				var st syscall.Stat_t
				if err := syscall.Lstat(p, &st); err != nil {
					return err
				}
				n++
				if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
					t.Errorf("%s is set-ID on disk: %o (owner %d)", p, st.Mode, st.Uid)
				}
				if typ := st.Mode & syscall.S_IFMT; typ == syscall.S_IFCHR || typ == syscall.S_IFBLK {
					t.Errorf("%s is a device node on disk", p)
				}
				return nil
			})
			if err != nil || n < 5 {
				t.Errorf("walk %s: %d entries, %v", probe, n, err)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(probe, "python"), &st); err != nil || st.Mode&0o7777 != 0o755 {
				t.Errorf("the copy of python on disk: mode %o, %v", st.Mode&0o7777, err)
			}
		})
	}
}

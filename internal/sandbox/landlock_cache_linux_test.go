package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The rights a kept grant gets are go-landlock's RODirs and ROFiles.
func TestKeptGrantRights(t *testing.T) {
	for _, tc := range []struct {
		rule landlock.FSRule
		mine landlock.AccessFSSet
	}{
		{landlock.RODirs("/x"), roDirAccess},
		{landlock.ROFiles("/x"), roFileAccess},
	} {
		if got, want := tc.rule.String(), fmt.Sprintf("REQUIRE %v for paths [/x]", tc.mine); got != want {
			t.Errorf("go-landlock: %s, kept grants: %s", got, want)
		}
	}
}

// cacheSpec is a workspace-policy spec whose hidden tree is inside its
// workspace, all under a root-owned directory only root may write (so
// that the system part's descriptors may be kept), and the parts cache
// with a clock that has moved on (what the test just made counts as
// settled).
func cacheSpec(t *testing.T) (*Spec, *systemParts, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if abi, err := ll.LandlockGetABIVersion(); err != nil || abi < 1 {
		t.Skip("no landlock")
	}
	base, err := os.MkdirTemp("/root", ".pyexec-llcache-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	ws := filepath.Join(base, "ws")
	for _, d := range []string{ws, filepath.Join(ws, ".state"), filepath.Join(ws, "foo"), filepath.Join(base, "tmp")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &Spec{Settings: Settings{Policy: PolicyWorkspace}, RunID: "cache", Workspace: ws, TmpDir: filepath.Join(base, "tmp"),
		Hidden: []string{filepath.Join(ws, ".state")}, RunAs: &Credential{UID: 65534, GID: 65534}}
	k := &systemParts{now: func() time.Time { return time.Now().Add(time.Hour) }}
	t.Cleanup(k.close)
	return s, k, base
}

// part makes s's ruleset through k and returns the system part it used.
func part(t *testing.T, k *systemParts, s *Spec) *systemPart {
	t.Helper()
	fd, _, desc, err := k.ruleset(s, 7, false, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if fd < 0 || len(desc) == 0 {
		t.Fatalf("no ruleset: %d %v", fd, desc)
	}
	unix.Close(fd)
	p := k.parts[systemKeyOf(s)]
	if p == nil {
		t.Fatal("the system part was not kept")
	}
	return p
}

func grantPaths(p *systemPart) []string {
	var out []string
	for _, g := range p.grants {
		out = append(out, g.path)
	}
	return out
}

// What is kept names what the paths name, is used again while nothing
// changed, and is never used for a path the run may write.
func TestSystemPartKept(t *testing.T) {
	s, k, _ := cacheSpec(t)
	p := part(t, k, s)
	foo := filepath.Join(s.Workspace, "foo")
	if !slices.Contains(grantPaths(p), foo) || slices.Contains(grantPaths(p), filepath.Join(s.Workspace, ".state")) {
		t.Fatalf("grants %v: want %s and not the hidden tree", grantPaths(p), foo)
	}
	nkept := 0
	for _, g := range p.grants {
		if g.fd < 0 {
			continue
		}
		nkept++
		var a, b unix.Stat_t
		if unix.Fstat(g.fd, &a) != nil || unix.Stat(g.path, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
			t.Errorf("kept descriptor of %s is not what the path names", g.path)
		}
	}
	if nkept == 0 {
		t.Fatal("nothing kept")
	}
	if again := part(t, k, s); again != p {
		t.Error("rebuilt though nothing changed")
	}
	_, rw, err := runGrants(s, false)
	if err != nil {
		t.Fatal(err)
	}
	kept, byName := p.split(rw)
	for _, g := range kept {
		for _, w := range rw {
			if inTree(g.path, w) || slices.ContainsFunc(g.deps, func(d string) bool { return inTree(d, w) }) {
				t.Errorf("%s is kept open though the run may write %s", g.path, w)
			}
		}
	}
	if !slices.Contains(byName, foo) {
		t.Errorf("%s (in the writable workspace) is not opened by name: %v", foo, byName)
	}
	// The same spec with a read-only workspace may use it.
	ro := *s
	ro.WorkspaceReadOnly = true
	_, rw, _ = runGrants(&ro, false)
	if kept, _ := p.split(rw); !slices.ContainsFunc(kept, func(g *systemGrant) bool { return g.path == foo }) {
		t.Errorf("%s not kept for a run that cannot write the workspace", foo)
	}
	// The workspace named through a symlink is still the workspace.
	link := filepath.Join(filepath.Dir(s.Workspace), "link")
	if err := os.Symlink(s.Workspace, link); err != nil {
		t.Fatal(err)
	}
	if kept, _ := p.split([]string{link}); slices.ContainsFunc(kept, func(g *systemGrant) bool { return g.path == foo }) {
		t.Errorf("%s kept for a run writing %s", foo, link)
	}
}

// Any change to what the system part was made from rebuilds it.
func TestSystemPartRebuilt(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, s *Spec, base string)
		want   string // a path the new grants have
	}{
		{"entry added", func(t *testing.T, s *Spec, base string) {
			if err := os.WriteFile(filepath.Join(s.Workspace, "new"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "ws/new"},
		{"granted directory swapped", func(t *testing.T, s *Spec, base string) {
			foo := filepath.Join(s.Workspace, "foo")
			if err := os.Rename(foo, foo+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(foo, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "ws/foo.old"},
		{"directory above swapped", func(t *testing.T, s *Spec, base string) {
			if err := os.Rename(s.Workspace, s.Workspace+".old"); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{s.Workspace, filepath.Join(s.Workspace, ".state"), filepath.Join(s.Workspace, "bar")} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}, "ws/bar"},
		{"mode of a directory above", func(t *testing.T, s *Spec, base string) {
			if err := os.Chmod(s.Workspace, 0o711); err != nil {
				t.Fatal(err)
			}
		}, "ws/foo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, k, base := cacheSpec(t)
			p := part(t, k, s)
			tc.change(t, s, base)
			if p.current() {
				t.Fatal("still current after the change")
			}
			q := part(t, k, s)
			if q == p {
				t.Fatal("not rebuilt")
			}
			if want := filepath.Join(base, tc.want); !slices.Contains(grantPaths(q), want) {
				t.Errorf("rebuilt grants %v lack %s", grantPaths(q), want)
			}
			for _, g := range p.grants {
				if g.fd >= 0 {
					t.Errorf("the old part's descriptor of %s is still open", g.path)
				}
			}
			for _, g := range q.grants {
				if g.fd < 0 {
					continue
				}
				var a, b unix.Stat_t
				if unix.Fstat(g.fd, &a) != nil || unix.Stat(g.path, &b) != nil || a.Ino != b.Ino {
					t.Errorf("rebuilt descriptor of %s is not what the path names", g.path)
				}
			}
		})
	}
}

// A part made while what it depends on had just changed is used once and
// not kept.
func TestSystemPartRacy(t *testing.T) {
	s, k, _ := cacheSpec(t)
	k.now = time.Now // the test's directories were made just now
	fd, _, _, err := k.ruleset(s, 7, false, false, "")
	if err != nil || fd < 0 {
		t.Fatal(fd, err)
	}
	unix.Close(fd)
	if p := k.parts[systemKeyOf(s)]; p != nil {
		t.Error("kept a part made right after a change")
	}
}

// A hidden tree inside another (a state dir in /tmp) adds nothing to what
// the system part depends on: changes beside it keep it.
func TestSystemPartNestedHidden(t *testing.T) {
	s, k, _ := cacheSpec(t)
	tmp := t.TempDir()
	s.Hidden = append(s.Hidden, filepath.Join(tmp, "state"))
	if err := os.Mkdir(filepath.Join(tmp, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := part(t, k, s)
	if err := os.WriteFile(filepath.Join(tmp, "beside"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !p.current() {
		t.Error("a change inside /tmp made the system part stale")
	}
	if err := os.WriteFile(filepath.Join(s.Workspace, "beside"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if p.current() {
		t.Error("a change beside the other hidden tree kept the system part")
	}
}

// Runs whose system parts may differ do not share one.
func TestSystemKey(t *testing.T) {
	base := Spec{Settings: Settings{Policy: PolicyWorkspace}, Hidden: []string{"/a"}, RunAs: &Credential{UID: 65534, GID: 65534}}
	same := base
	same.Workspace, same.TmpDir, same.ReadOnly = "/elsewhere", "/tmp/run-2", []string{"/py"}
	if systemKeyOf(&base) != systemKeyOf(&same) {
		t.Error("the run's own paths changed the key")
	}
	for name, edit := range map[string]func(*Spec){
		"policy": func(s *Spec) { s.Policy = PolicyStrict },
		"hidden": func(s *Spec) { s.Hidden = []string{"/a", "/b"} },
		"uid":    func(s *Spec) { s.RunAs = &Credential{UID: 1000, GID: 65534} },
		"gid":    func(s *Spec) { s.RunAs = &Credential{UID: 65534, GID: 42} },
		"root":   func(s *Spec) { s.RunAs = nil },
	} {
		other := base
		edit(&other)
		if systemKeyOf(&base) == systemKeyOf(&other) {
			t.Errorf("%s: same key", name)
		}
	}
}

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hiddenFixture is a 0700 root-owned directory (like /root) under /var/tmp
// (readable under the workspace policy, so listing shows what the mount
// namespace leaves) holding a state dir with a code file, a run tmp dir, a
// secret jobs.db and another run's tmp, plus a data dir reached through a
// symlink alias.
type hiddenFixture struct {
	hidden, code, tmp, jobsDB, otherTmp, data, alias string
}

func newHiddenFixture(t *testing.T) *hiddenFixture {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "pyexec-reach-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	h := &hiddenFixture{hidden: filepath.Join(base, "home")}
	state := filepath.Join(h.hidden, ".local", "state", "pyexec")
	h.code = filepath.Join(state, "code", "abc.py")
	h.tmp = filepath.Join(state, "tmp", "run-1")
	h.otherTmp = filepath.Join(state, "tmp", "run-2")
	h.jobsDB = filepath.Join(state, "jobs.db")
	h.data = filepath.Join(h.hidden, "versions", "1.0")
	h.alias = filepath.Join(h.hidden, "versions", "1")
	for _, d := range []string{filepath.Dir(h.code), h.tmp, h.otherTmp, h.data, filepath.Join(h.hidden, ".ssh")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(h.hidden, 0o700)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(h.code, []byte("print('code file ran')\n"), 0o644))
	must(os.WriteFile(h.jobsDB, []byte("SECRET-JOBS"), 0o644))
	must(os.WriteFile(filepath.Join(h.otherTmp, "x"), []byte("SECRET-OTHER"), 0o644))
	must(os.WriteFile(filepath.Join(h.hidden, ".ssh", "id_rsa"), []byte("SECRET-KEY"), 0o644))
	must(os.WriteFile(filepath.Join(h.data, "data.txt"), []byte("DATA"), 0o644))
	must(os.Symlink("1.0", h.alias))
	return h
}

func TestPlanReach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	h := newHiddenFixture(t)
	nobody := &Credential{UID: 65534, GID: 65534}
	plan, err := planReach(nobody, []string{h.code, h.alias, "/usr/lib", filepath.Join(h.data, "data.txt")}, []string{h.tmp})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Tops) != 1 || plan.Tops[0] != h.hidden {
		t.Errorf("tops = %v, want [%s]", plan.Tops, h.hidden)
	}
	var got []string
	for _, b := range plan.Binds {
		got = append(got, strings.TrimPrefix(b.Path, h.hidden))
	}
	// /usr/lib is reachable (no bind); data.txt comes with its directory.
	if want := "/versions/1.0 /.local/state/pyexec/tmp/run-1 /.local/state/pyexec/code/abc.py"; strings.Join(got, " ") != want {
		t.Errorf("binds = %v, want %s", got, want)
	}
	if len(plan.Links) != 1 || plan.Links[0].Path != h.alias || plan.Links[0].Target != "1.0" {
		t.Errorf("links = %+v", plan.Links)
	}
	// Reachable paths need no namespace at all.
	if p, err := planReach(nobody, []string{"/usr/lib"}, []string{"/var/tmp"}); err != nil || p != nil {
		t.Errorf("reachable paths: plan %+v, %v", p, err)
	}
}

// reachPython is an interpreter under /root (0700 here), when there is one.
func reachPython(t *testing.T) (bin, prefix string) {
	t.Helper()
	prefix = "/root/.pyenv/versions/3.11.7"
	bin = filepath.Join(prefix, "bin", "python3")
	if _, err := os.Stat(bin); err != nil {
		t.Skip("needs " + bin)
	}
	if st, _ := os.Stat("/root"); st.Mode().Perm()&0o001 != 0 {
		t.Skip("/root is searchable by others here")
	}
	return bin, prefix
}

func TestReachRunsAsNobody(t *testing.T) {
	bin, prefix := reachPython(t)
	e := newEnv(t)
	h := newHiddenFixture(t)
	code := `
import os, sys, json, sqlite3, ssl, decimal
print("uid", os.getuid())
print("exe", sys.executable)
open(os.path.join(os.environ["TMPDIR"], "t"), "w").write("t")
open("w.txt", "w").write("w")
print("data", open(sys.argv[1] + "/data.txt").read())
def probe(p):
    try:
        return sorted(os.listdir(p))
    except OSError as e:
        return type(e).__name__
def stat(p):
    try:
        os.stat(p); return "visible"
    except OSError as e:
        return type(e).__name__
hidden = sys.argv[2]
print("list-hidden", probe(hidden))
print("list-state", probe(hidden + "/.local/state/pyexec"))
print("list-tmp", probe(hidden + "/.local/state/pyexec/tmp"))
for name in ["jobs.db", "other", "ssh"]:
    p = {"jobs.db": hidden + "/.local/state/pyexec/jobs.db",
         "other": hidden + "/.local/state/pyexec/tmp/run-2/x",
         "ssh": hidden + "/.ssh/id_rsa"}[name]
    print("stat-" + name, stat(p))
print("stat-root-bashrc", stat("/root/.bashrc"))
import errno
for name, p in [("ro-write", sys.argv[1] + "/new"), ("skeleton-write", hidden + "/new")]:
    try:
        open(p, "w")
        print(name, "allowed")
    except OSError as e:
        print(name, "denied" if e.errno in (errno.EACCES, errno.EROFS, errno.EPERM) else e)
`
	for _, p := range []Policy{PolicyWorkspace, PolicyStrict} {
		t.Run(string(p), func(t *testing.T) {
			os.Chown(h.tmp, 0, 0)
			s := e.spec(p)
			s.TmpDir = h.tmp
			s.ReadOnly = []string{prefix, h.code, h.alias}
			s.Hidden = []string{h.hidden}
			res := sandboxed(t, s, 20*time.Second, bin, "-c", code, h.alias, h.hidden)
			if res.StartErr != "" || res.Exit != 0 {
				t.Fatalf("start=%q exit=%d stderr=%s", res.StartErr, res.Exit, res.Stderr)
			}
			out := res.Stdout
			for _, want := range []string{
				"uid 65534\n", "data DATA\n",
				"stat-jobs.db FileNotFoundError", "stat-other FileNotFoundError", "stat-ssh FileNotFoundError",
				"stat-root-bashrc FileNotFoundError",
				"ro-write denied", "skeleton-write denied",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("want %q in:\n%s", want, out)
				}
			}
			if p == PolicyWorkspace {
				// Landlock grants /var/tmp (where the fixture lives) but
				// hides Spec.Hidden; listing the state dir skeleton is
				// denied either way, but stat shows what exists.
				if !strings.Contains(out, "list-hidden PermissionError") {
					t.Errorf("hidden dir listable:\n%s", out)
				}
			}
			if _, err := os.Stat(filepath.Join(e.ws, "w.txt")); err != nil {
				t.Errorf("workspace write: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(h.tmp, "t")); err != nil || string(b) != "t" {
				t.Errorf("tmp write: %v", err)
			}
			if !strings.Contains(strings.Join(res.Report.Applied, "\n"), "hidden behind a tmpfs") {
				t.Errorf("applied does not mention the binds: %v", res.Report.Applied)
			}
			noCgroupLeft(t)
		})
	}
}

// The skeleton shows exactly the bound chain when nothing else hides it.
func TestReachSkeletonListing(t *testing.T) {
	bin, prefix := reachPython(t)
	e := newEnv(t)
	h := newHiddenFixture(t)
	s := e.spec(PolicyWorkspace)
	s.ReadOnly = []string{prefix, h.code}
	s.ReadWrite = []string{h.tmp}
	code := `
import os, sys
h = sys.argv[1]
for p in [h, h + "/.local/state/pyexec", h + "/.local/state/pyexec/tmp", "/root", "/root/.pyenv/versions"]:
    print(p.replace(h, "H"), sorted(os.listdir(p)))
`
	res := sandboxed(t, s, 20*time.Second, bin, "-c", code, h.hidden)
	if res.StartErr != "" || res.Exit != 0 {
		t.Fatalf("start=%q exit=%d stderr=%s", res.StartErr, res.Exit, res.Stderr)
	}
	want := "H ['.local']\nH/.local/state/pyexec ['code', 'tmp']\nH/.local/state/pyexec/tmp ['run-1']\n" +
		"/root ['.pyenv']\n/root/.pyenv/versions ['3.11.7']\n"
	if res.Stdout != want {
		t.Errorf("listing:\n%s\nwant:\n%s", res.Stdout, want)
	}
}

// Fail safe: when the binds cannot be made, the run fails with what to do;
// it never falls back to root (without capabilities, but owner of every
// root-owned file the sandbox leaves reachable).
func TestReachFailsClosed(t *testing.T) {
	needPython(t)
	e := newEnv(t)
	h := newHiddenFixture(t)
	s := e.spec(PolicyWorkspace)
	s.ReadOnly = []string{h.code}
	// The launcher is told to fail after covering the hidden dir.
	s.RunID = "test-reachfail-" + strings.ReplaceAll(filepath.Base(e.base), "pyexec-sbx-", "")
	res := sandboxed(t, s, 20*time.Second, py("import os, sys; exec(open(sys.argv[1]).read()); print(os.getuid())", h.code)...)
	if !strings.Contains(res.StartErr, "cannot run as") || !strings.Contains(res.StartErr, "--run-as none") || res.Stdout != "" {
		t.Errorf("want a closed failure naming the fix, got start=%q out=%q", res.StartErr, res.Stdout)
	}
	noCgroupLeft(t)
}

// BenchmarkReachApply is the cost of the binds alone: a private mount
// namespace (as every confined run of a root server gets) with and without
// the reach plan of a run of a /root interpreter (prefix, code file, tmp dir).
func BenchmarkReachApply(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	_, prefix := reachPython(&testing.T{})
	base, err := os.MkdirTemp("/var/tmp", "pyexec-reach-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(base)
	home := filepath.Join(base, "home")
	code := filepath.Join(home, "state", "code", "x.py")
	tmp := filepath.Join(home, "state", "tmp", "run-1")
	os.MkdirAll(filepath.Dir(code), 0o755)
	os.MkdirAll(tmp, 0o755)
	os.WriteFile(code, []byte("print(1)\n"), 0o644)
	os.Chmod(home, 0o700)
	plan, err := planReach(&Credential{UID: 65534, GID: 65534}, []string{prefix, code}, []string{tmp})
	if err != nil || plan == nil {
		b.Fatalf("plan %v %v", plan, err)
	}
	b.Run("shm-only", func(b *testing.B) {
		benchThread(b, func() error { return enterPrivateShm(64 << 20) })
	})
	b.Run("shm+binds", func(b *testing.B) {
		benchThread(b, func() error {
			if err := enterPrivateShm(64 << 20); err != nil {
				return err
			}
			return plan.apply()
		})
	})
	b.Run("plan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := planReach(&Credential{UID: 65534, GID: 65534}, []string{prefix, code}, []string{tmp}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRunReach runs a /root interpreter's `-S -c print(1)` through the
// miniature launcher: as root (policy none; workspace as root without
// capabilities, the old fallback) and as nobody with the binds.
func BenchmarkRunReach(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	bin, prefix := reachPython(&testing.T{})
	base, err := os.MkdirTemp("/var/tmp", "pyexec-reach-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	ws := filepath.Join(base, "ws")
	os.Mkdir(ws, 0o777)
	os.Chmod(ws, 0o777)
	home := filepath.Join(base, "home")
	code := filepath.Join(home, "state", "code", "x.py")
	os.MkdirAll(filepath.Dir(code), 0o755)
	os.MkdirAll(filepath.Join(home, "state", "tmp"), 0o755)
	os.WriteFile(code, []byte("print(1)\n"), 0o644)
	os.Chmod(home, 0o700)
	nobody, _ := LookupCredential("nobody")
	rootWS := filepath.Join(base, "rootws") // root's 0755: idmapped for nobody
	os.Mkdir(rootWS, 0o755)
	for _, c := range []struct {
		name string
		p    Policy
		as   *Credential
		ws   string
	}{{"none-root", PolicyNone, nil, ws}, {"workspace-root-nocaps", PolicyWorkspace, nil, ws},
		{"workspace-nobody-binds", PolicyWorkspace, nobody, ws}, {"workspace-nobody-binds-idmap", PolicyWorkspace, nobody, rootWS},
		{"strict-nobody-binds-idmap", PolicyStrict, nobody, rootWS}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				tmp, err := os.MkdirTemp(filepath.Join(home, "state", "tmp"), "run-")
				if err != nil {
					b.Fatal(err)
				}
				spec := Spec{Settings: Settings{Policy: c.p}, Workspace: c.ws, TmpDir: tmp, RunAs: c.as,
					ReadOnly: []string{prefix, code}, Hidden: []string{home},
					RunID: fmt.Sprintf("bench-%d-%d", os.Getpid(), runCounter.Add(1))}
				raw, _ := spec.Marshal()
				rep := filepath.Join(base, "r.json")
				cmd := exec.Command(os.Args[0], bin, "-S", code)
				cmd.Env = append(os.Environ(), envLauncher+"=1", envSpec+"="+string(raw), envReport+"="+rep)
				out, err := cmd.Output()
				if err != nil || string(out) != "1\n" {
					r, _ := os.ReadFile(rep)
					b.Fatalf("%q %v %s", out, err, r)
				}
				os.RemoveAll(tmp)
			}
		})
	}
}

// A workspace owned by the server (root, 0755) is written by the nobody
// run through an idmapped mount: root's files read as nobody's, new files
// are root's on disk, other owners' files keep their permissions.
func TestIdmappedWorkspace(t *testing.T) {
	needPython(t)
	e := newEnv(t)
	ws := filepath.Join(e.base, "rootws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("root's"), 0o644)
	os.WriteFile(filepath.Join(ws, "theirs.txt"), []byte("1234's"), 0o644)
	os.Chown(filepath.Join(ws, "theirs.txt"), 1234, 1234)
	if err := IdmapAvailable(e.nobody, ws); err != nil {
		t.Skip("no idmapped mounts here: ", err)
	}
	for _, p := range []Policy{PolicyWorkspace, PolicyStrict} {
		t.Run(string(p), func(t *testing.T) {
			s := e.spec(p)
			s.Workspace = ws
			code := `
import os
print(os.getuid(), os.stat(".").st_uid, os.stat("mine.txt").st_uid)
open("new-` + string(p) + `.txt", "w").write("new")
open("mine.txt", "a").write("+")
try:
    open("theirs.txt", "a").write("+")
    print("theirs writable")
except PermissionError:
    print("theirs denied")
`
			res := sandboxed(t, s, 20*time.Second, py(code)...)
			if res.StartErr != "" || res.Exit != 0 {
				t.Fatalf("start=%q exit=%d stderr=%s", res.StartErr, res.Exit, res.Stderr)
			}
			if res.Stdout != "65534 65534 65534\ntheirs denied\n" {
				t.Errorf("stdout %q", res.Stdout)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(ws, "new-"+string(p)+".txt"), &st); err != nil || st.Uid != 0 {
				t.Errorf("new file on disk: uid %d, %v", st.Uid, err)
			}
		})
	}
	ch, err := ChooseRunAs(RunAsAuto, ws, []string{python})
	if err != nil || ch.Cred == nil || !ch.IdmappedWorkspace {
		t.Errorf("auto with a root-owned workspace: %+v %v", ch, err)
	}
}

// BenchmarkIdmapWorkspace is the cost of the idmapped workspace alone: the
// user namespace (a short-lived sleep) and the idmapped mount.
func BenchmarkIdmapWorkspace(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	ws, err := os.MkdirTemp("/var/tmp", "pyexec-idmap-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(ws)
	nobody := &Credential{UID: 65534, GID: 65534}
	b.Run("userns", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			fd, err := usernsFD(nobody)
			if err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
		}
	})
	fd, err := usernsFD(nobody)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	b.Run("mount", func(b *testing.B) {
		benchThread(b, func() error {
			if err := enterPrivateShm(1 << 20); err != nil {
				return err
			}
			return idmapOver(ws, fd)
		})
	})
}

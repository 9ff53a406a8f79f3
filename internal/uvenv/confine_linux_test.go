package uvenv

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// recordingConfiner counts the commands that went through it.
type recordingConfiner struct{ argv [][]string }

func (r *recordingConfiner) run(ctx context.Context, c Command) (int, error) {
	r.argv = append(r.argv, c.Argv)
	for _, w := range c.Writable {
		if fi, err := os.Stat(w); err != nil || !fi.IsDir() {
			return 0, errors.New("writable dir missing: " + w)
		}
	}
	return directConfiner(ctx, c)
}

// writeSdist writes NAME-VERSION.tar.gz into dir: a project whose build
// backend is a module of its own (backend-path = ["."]) that builds a
// wheel holding one module, and whose every hook touches marker.
func writeSdist(t *testing.T, dir, name, version, marker string) string {
	t.Helper()
	mod := strings.ReplaceAll(name, "-", "_")
	backend := `import base64, hashlib, os, zipfile
MARKER = ` + "%q" + `
def _touch():
    with open(MARKER, "a") as f:
        f.write("%d\n" % os.getuid())
def get_requires_for_build_wheel(config_settings=None):
    _touch()
    return []
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _touch()
    d = os.path.join(metadata_directory, "NAME-VERSION.dist-info")
    os.makedirs(d)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: NAME\nVersion: VERSION\n")
    return "NAME-VERSION.dist-info"
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _touch()
    name = "MOD-VERSION-py3-none-any.whl"
    files = {"MOD/__init__.py": "BUILT = True\n",
             "MOD-VERSION.dist-info/METADATA": "Metadata-Version: 2.1\nName: NAME\nVersion: VERSION\n",
             "MOD-VERSION.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for p, c in files.items():
            z.writestr(p, c)
            h = base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (p, h, len(c)))
        record.append("MOD-VERSION.dist-info/RECORD,,")
        z.writestr("MOD-VERSION.dist-info/RECORD", "\n".join(record) + "\n")
    return name
`
	backend = strings.NewReplacer("NAME", name, "VERSION", version, "MOD", mod).Replace(backend)
	backend = strings.Replace(backend, "%q", `"`+marker+`"`, 1)
	files := map[string]string{
		"pyproject.toml": "[build-system]\nrequires = []\nbuild-backend = \"evilbackend\"\nbackend-path = [\".\"]\n\n[project]\nname = \"" + name + "\"\nversion = \"" + version + "\"\n",
		"evilbackend.py": backend,
		"PKG-INFO":       "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n",
	}
	path := filepath.Join(dir, mod+"-"+version+".tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for n, c := range files {
		tw.WriteHeader(&tar.Header{Name: mod + "-" + version + "/" + n, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg})
		tw.Write([]byte(c))
	}
	tw.Close()
	gz.Close()
	f.Close()
	return path
}

// TestSdistIsBuiltOnlyConfined: a requirement that exists only as an sdist
// fails the trusted wheels-only pass without running its backend, and is
// built through the Confiner; without one, it is refused.
func TestSdistIsBuiltOnlyConfined(t *testing.T) {
	f := newFixture(t)
	marker := filepath.Join(t.TempDir(), "marker")
	writeSdist(t, f.wheels, "pyexec-sdist", "1.0", marker)
	m := f.manager()

	_, _, err := m.Ensure(context.Background(), Spec{Python: basePython, Requirements: []string{"pyexec-sdist"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "only confined") {
		t.Fatalf("without a Confiner: err = %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the sdist's build backend ran outside the Confiner")
	}

	rec := &recordingConfiner{}
	env := ensure(t, m, Spec{Python: basePython, Requirements: []string{"pyexec-sdist", "pyexec-alpha==1.0"}, Confine: rec.run})
	if want := []string{"pyexec-alpha==1.0", "pyexec-sdist==1.0"}; !slices.Equal(env.Resolved, want) {
		t.Fatalf("resolved %q, want %q", env.Resolved, want)
	}
	if len(rec.argv) == 0 {
		t.Fatal("nothing went through the Confiner")
	}
	if got := py(t, env.Python, "import pyexec_sdist; print(pyexec_sdist.BUILT)"); got != "True" {
		t.Fatalf("built module: %s", got)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the backend did not run in the confined pass: %v", err)
	}
	// The server took the env over: sealed (compiled by the build), its
	// own, read-only, and never compiled by the server.
	man, err := readManifest(filepath.Join(env.Dir, manifestName))
	if err != nil || !man.Sealed || !man.Confined {
		t.Fatalf("manifest %+v %v", man, err)
	}
	m.Wait()
	pyc, _ := filepath.Glob(filepath.Join(env.Dir, "lib", "python*", "site-packages", "pyexec_sdist", "__pycache__", "*.pyc"))
	if len(pyc) == 0 {
		t.Error("the confined build compiled no bytecode")
	}

	// A wheels-only requirement never touches the Confiner.
	rec2 := &recordingConfiner{}
	ensure(t, m, Spec{Python: basePython, Requirements: []string{"pyexec-beta"}, Confine: rec2.run})
	if len(rec2.argv) != 0 {
		t.Fatalf("a wheel install went confined: %q", rec2.argv)
	}
}

// Local requirements and projects never take the trusted pass, even when
// what they name could be installed without building.
func TestLocalRequirementGoesConfined(t *testing.T) {
	f := newFixture(t)
	wheel, _ := filepath.Glob(filepath.Join(f.wheels, "pyexec_alpha-1.0-*.whl"))
	if len(wheel) != 1 {
		t.Fatal("no alpha 1.0 wheel")
	}
	rec := &recordingConfiner{}
	env := ensure(t, f.manager(), Spec{Python: basePython, Requirements: []string{"pyexec-alpha @ file://" + wheel[0]}, Confine: rec.run})
	if len(rec.argv) == 0 || !slices.Contains(env.Resolved, "pyexec-alpha==1.0") {
		t.Fatalf("resolved %q through %d confined commands", env.Resolved, len(rec.argv))
	}
}

func TestRequirementKinds(t *testing.T) {
	tests := []struct {
		req   string
		local string
		build bool
	}{
		{"requests>=2", "", false},
		{"pkg @ https://example.invalid/pkg-1.0-py3-none-any.whl", "", false},
		{"pkg @ file:///ws/pkg", "/ws/pkg", true},
		{"pkg @ file:/ws/pkg", "/ws/pkg", true},
		{"pkg @ ./pkg", "./pkg", true},
		{"pkg @ /abs/pkg", "/abs/pkg", true},
		{"pkg @ git+https://example.invalid/pkg.git", "", true},
	}
	for _, tt := range tests {
		r, err := ParseRequirement(tt.req)
		if err != nil {
			t.Fatalf("%s: %v", tt.req, err)
		}
		if got := r.LocalPath(); got != tt.local {
			t.Errorf("%s: LocalPath %q, want %q", tt.req, got, tt.local)
		}
		if got := r.buildsFromSource(); got != tt.build {
			t.Errorf("%s: buildsFromSource %v, want %v", tt.req, got, tt.build)
		}
	}
	for _, tt := range []struct {
		stderr string
		want   bool
	}{
		{"hint: Wheels are required for `x` because building from source is disabled for all packages (i.e., with `--no-build`)", true},
		{"No solution found when resolving dependencies: Because you require x>=9", false},
	} {
		if got := needsBuild(&UVError{Args: []string{"pip"}, Stderr: tt.stderr}); got != tt.want {
			t.Errorf("needsBuild(%q) = %v", tt.stderr, got)
		}
	}
}

// TestAdoptFollowsNothing: taking over what a build left changes owners and
// modes of the env's own entries only: a symlink to a file outside is
// neither chowned through nor chmodded through, setuid bits go, and a FIFO
// or a hard link to an outside file is not kept.
func TestAdoptFollowsNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (files of another owner)")
	}
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("x"), 0o600)
	os.Chown(outside, 1234, 1234)
	env := filepath.Join(dir, "env")
	os.MkdirAll(filepath.Join(env, "bin"), 0o777)
	os.WriteFile(filepath.Join(env, "bin", "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.Chmod(filepath.Join(env, "bin", "tool"), 0o4777)
	os.Symlink(outside, filepath.Join(env, "link"))
	syscall.Mkfifo(filepath.Join(env, "fifo"), 0o644)
	filepath.Walk(env, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 65534, 65534) })

	if err := adopt(env); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	syscall.Stat(outside, &st)
	if st.Uid != 1234 || st.Mode&0o777 != 0o600 {
		t.Errorf("the symlink's target changed: uid %d mode %o", st.Uid, st.Mode&0o7777)
	}
	syscall.Stat(filepath.Join(env, "bin", "tool"), &st)
	if st.Uid != uint32(os.Geteuid()) || st.Mode&0o7000 != 0 || st.Mode&0o222 != 0 {
		t.Errorf("tool: uid %d mode %o, want the server's, no setuid, read-only", st.Uid, st.Mode&0o7777)
	}
	if _, err := os.Lstat(filepath.Join(env, "fifo")); err == nil {
		t.Error("a FIFO was kept")
	}

	hard := filepath.Join(dir, "env2")
	os.MkdirAll(hard, 0o755)
	if err := os.Link(outside, filepath.Join(hard, "linked")); err != nil {
		t.Skip(err)
	}
	if err := adopt(hard); err == nil || !strings.Contains(err.Error(), "hard-linked") {
		t.Errorf("hard link to an outside file: %v", err)
	}
	syscall.Stat(outside, &st)
	if st.Uid != 1234 {
		t.Error("the hard-linked file was chowned")
	}
}

// The manifest and the METADATA reads never follow what a build planted.
func TestManifestAndMetadataFollowNoSymlink(t *testing.T) {
	env := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, []byte("Name: secret\nVersion: 1\n"), 0o644)
	os.Symlink(outside, filepath.Join(env, manifestName))
	if err := writeManifest(env, Manifest{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(outside); !strings.HasPrefix(string(data), "Name: secret") {
		t.Fatalf("writing the manifest wrote through a symlink: %q", data)
	}
	site := filepath.Join(env, "lib", "python3.11", "site-packages")
	os.MkdirAll(filepath.Join(site, "ok-1.0.dist-info"), 0o755)
	os.WriteFile(filepath.Join(site, "ok-1.0.dist-info", "METADATA"), []byte("Name: ok\nVersion: 1.0\n"), 0o644)
	os.MkdirAll(filepath.Join(site, "evil-1.0.dist-info"), 0o755)
	os.Symlink(outside, filepath.Join(site, "evil-1.0.dist-info", "METADATA"))
	if got, err := installed(env); err == nil {
		t.Fatalf("a METADATA symlink was read: %q", got)
	}
	os.Remove(filepath.Join(site, "evil-1.0.dist-info", "METADATA"))
	os.Remove(filepath.Join(site, "evil-1.0.dist-info"))
	os.Symlink(filepath.Dir(outside), filepath.Join(site, "other-1.0.dist-info"))
	if got, err := installed(env); err != nil || !slices.Equal(got, []string{"ok==1.0"}) {
		t.Fatalf("installed = %q, %v (a symlinked dist-info dir must be skipped)", got, err)
	}
}

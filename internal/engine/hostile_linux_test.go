package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/testutil/hostile"
)

// TestHostileCorpusEngine runs the hostile corpus through the real engine
// and launcher, as nobody (the run-as default when nobody can reach the
// interpreter and write the workspace), then checks the server still works
// and nothing of any run is left.
func TestHostileCorpusEngine(t *testing.T) {
	h := newHostileSetup(t)
	eng, ws, state := h.eng, h.ws, h.state
	for _, c := range h.cases {
		t.Run(c.Name, func(t *testing.T) {
			req := h.request(t, c)
			req.ScriptPath = c.Script
			res, err := eng.Run(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := hostile.Outcome{
				ExitCode: res.ExitCode, TimedOut: res.TimedOut, LimitExceeded: res.LimitExceeded,
				Stdout: res.Stdout, Stderr: res.Stderr, StdoutTruncated: res.StdoutTruncated, StdoutBytes: res.StdoutBytes,
				Extra: "sandbox=" + res.Sandbox + " notes=" + strings.Join(res.SandboxNotes, "|"),
			}
			if !strings.Contains(res.Sandbox, "uid 65534") {
				t.Errorf("did not run as nobody: %s", out)
			}
			c.Expect.Check(t, out, h.listeners)
			if c.Expect.NoLeftovers {
				assertNothingLeft(t, eng, ws, state)
			}
		})
	}

	// Other runs' code, temp dirs (and later logs) live in the state dir:
	// hidden from runs, even though the rest of the system is readable.
	res0, err := eng.Run(context.Background(), Request{Code: `
import os, sys
for p in [os.path.join(sys.argv[1], "code"), os.path.join(sys.argv[1], "tmp")]:
    try:
        print("LISTED", p, os.listdir(p))
    except OSError as e:
        print("DENIED", p, e.errno)
`, Args: []string{state}}, nil)
	if err != nil || strings.Contains(res0.Stdout, "LISTED") || strings.Count(res0.Stdout, "DENIED") != 2 {
		t.Errorf("state dir readable by a run: %+v %v", res0, err)
	}

	// The server still answers after the corpus.
	res, err := eng.Run(context.Background(), Request{Code: "print('still here')"}, nil)
	if err != nil || strings.TrimSpace(res.Stdout) != "still here" {
		t.Fatalf("engine after the corpus: %+v %v", res, err)
	}
	assertNothingLeft(t, eng, ws, state)
}

// hostileSetup is what every run of the hostile corpus needs: an engine
// whose runs go as nobody, a workspace, a directory outside it, a secret
// file, and the host listeners the network cases try to reach.
type hostileSetup struct {
	eng                        *Engine
	dir                        string // the corpus scripts
	cases                      []hostile.Case
	ws, state, outside, secret string
	listeners                  *hostile.Listeners
}

func newHostileSetup(t *testing.T) *hostileSetup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the hostile corpus needs root (cgroups, run-as)")
	}
	// pyenv's interpreter under /root (0700) when there is one, as on
	// these machines: runs reach it through their mount namespace binds.
	py := "/root/.pyenv/versions/3.11.7/bin/python3"
	if _, err := os.Stat(py); err != nil {
		py = "/usr/bin/python3.11"
	}
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs " + py)
	}
	h := &hostileSetup{}
	h.dir, h.cases = hostile.Load(t)

	// The workspace is writable by nobody; the state dir lives under a
	// 0700 "home" like /root/.local/state/pyexec (the default here), which
	// runs reach only through their mount namespace binds.
	base, err := os.MkdirTemp("", "pyexec-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	h.ws, h.state, h.outside = filepath.Join(base, "ws"), filepath.Join(base, "home", "state"), filepath.Join(base, "outside")
	for _, d := range []string{h.ws, h.state, h.outside} {
		os.MkdirAll(d, 0o755)
	}
	os.Chmod(filepath.Join(base, "home"), 0o700)
	os.Chmod(h.ws, 0o777)
	os.Chmod(h.outside, 0o777)
	h.secret = hostile.SecretFile(t)

	h.eng, err = New(Config{Workspace: h.ws, StateDir: h.state, Python: py})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.eng.Close() })
	h.listeners = hostile.NewListeners(t)
	return h
}

// request writes c's script into the workspace and returns a request with
// c's policy, network, timeout, limits and arguments (placeholders filled);
// the caller says what runs.
func (h *hostileSetup) request(t *testing.T, c hostile.Case) Request {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(h.dir, c.Script))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.ws, c.Script), src, 0o644); err != nil {
		t.Fatal(err)
	}
	req := Request{Timeout: c.Timeout, Sandbox: c.Policy, Network: c.Network,
		Args: h.listeners.Args(c, h.outside, h.secret)}
	if len(c.Limits) > 0 {
		req.Limits = new(sandbox.Limits)
		if err := json.Unmarshal(c.Limits, req.Limits); err != nil {
			t.Fatal(err)
		}
	}
	return req
}

// assertNothingLeft checks that no process mentions the workspace, no run
// temp dir remains and no run cgroup remains under our own cgroups, but
// those of the runs whose temp dirs are kept (live sessions).
func assertNothingLeft(t *testing.T, eng *Engine, ws, state string, kept ...string) {
	t.Helper()
	eng.settle()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(cmd), ws) {
			t.Errorf("process %s outlived its run: %q", e.Name(), strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	root := eng.tmpQuota.dir // state/tmp, or the temp dir filesystem in it
	tmps, _ := os.ReadDir(root)
	tmps = slices.DeleteFunc(tmps, func(d os.DirEntry) bool {
		return eng.tmp.isSpare(filepath.Join(root, d.Name())) || slices.Contains(kept, filepath.Join(root, d.Name()))
	})
	if len(tmps) > 0 {
		t.Errorf("run temp dirs left: %v", tmps)
	}
	var spares []string
	if eng.warm != nil {
		spares = eng.warm.confine.Spares() // fresh, for the next runs; Close removes them
	}
	for _, ent := range tmpsOfCgroups(state) {
		if slices.Contains(spares, ent) {
			continue
		}
		if !slices.ContainsFunc(kept, func(tmp string) bool { return strings.HasPrefix(filepath.Base(ent), "pyexec-"+filepath.Base(tmp)+"-") }) {
			t.Errorf("run cgroup left: %s", ent)
		}
	}
}

// tmpsOfCgroups lists the run cgroups of this state dir's runs under this
// process's own memory cgroup (runs are created next to the launcher's
// cgroup, which is ours). Other test packages running at the same time use
// the same parent, so a cgroup counts only if its run id, "run-N-<crc32 of
// the run's tmp dir>", points into this state dir, or if it is one of the
// state dir's spares, "spare-<crc32 of the state's tmp dir>-PIDNS-PID-N".
func tmpsOfCgroups(state string) []string {
	raw, _ := os.ReadFile("/proc/self/cgroup")
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && parts[1] == "memory" {
			dir := filepath.Join("/sys/fs/cgroup/memory", parts[2])
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				name, ok := strings.CutPrefix(e.Name(), "pyexec-")
				i := strings.LastIndex(name, "-")
				if !ok || !e.IsDir() || i < 0 {
					continue
				}
				tmp := filepath.Join(state, "tmp", name[:i])
				spare := "spare-" + fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(filepath.Join(state, "tmp")))) + "-"
				if fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(tmp))) == name[i+1:] || strings.HasPrefix(name, spare) {
					out = append(out, filepath.Join(dir, e.Name()))
				}
			}
		}
	}
	return out
}

// BenchmarkSandboxOverhead runs print(1) through the real engine under each
// policy (a server at policy none, requests tightening it), so the ratios
// between sub-benchmarks are the per-run cost of confinement measured in the
// same run. Policy none still gets its cgroup and rlimits.
func BenchmarkSandboxOverhead(b *testing.B) {
	const py = "/usr/bin/python3.11"
	base, err := os.MkdirTemp("", "pyexec-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o777)
	eng, err := New(Config{Workspace: base, StateDir: filepath.Join(base, "state"), Python: py,
		Sandbox: sandbox.Settings{Policy: sandbox.PolicyNone}})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	for _, policy := range []string{"none", "workspace", "strict"} {
		b.Run(policy, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res, err := eng.Run(context.Background(), Request{Code: "print(1)", Sandbox: policy}, nil)
				if err != nil || res.Stdout != "1\n" {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}

// The leftover check itself must see a run cgroup of its state dir.
func TestLeftoverCgroupCheckSeesOwnRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	state := t.TempDir()
	raw, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(raw), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] != "memory" {
			continue
		}
		tmp := filepath.Join(state, "tmp", "run-42")
		dir := filepath.Join("/sys/fs/cgroup/memory", parts[2], fmt.Sprintf("pyexec-run-42-%08x", crc32.ChecksumIEEE([]byte(tmp))))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skip(err)
		}
		defer os.Remove(dir)
		if got := tmpsOfCgroups(state); len(got) != 1 {
			t.Fatalf("check found %v, want the one cgroup", got)
		}
		if got := tmpsOfCgroups(t.TempDir()); len(got) != 0 {
			t.Fatalf("another state dir's check found %v", got)
		}
		spare := filepath.Join(filepath.Dir(dir), fmt.Sprintf("pyexec-spare-%08x-1-%d-1", crc32.ChecksumIEEE([]byte(filepath.Join(state, "tmp"))), os.Getpid()))
		if err := os.Mkdir(spare, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(spare)
		if got := tmpsOfCgroups(state); len(got) != 2 {
			t.Fatalf("check found %v, want the cgroup and the spare", got)
		}
		return
	}
	t.Skip("no v1 memory cgroup")
}

package jobs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseProgress(t *testing.T) {
	tests := []struct {
		line    string
		want    Progress
		wantErr bool
	}{
		{`{"current":5,"total":10,"message":"half"}`, Progress{Current: 5, Total: 10, Message: "half"}, false},
		{`{"current":0.25}`, Progress{Current: 0.25}, false},
		{`  {"current": 3, "total": null, "message": null, "extra": 1}  `, Progress{Current: 3}, false},
		{`{"current":1,"message":"ünï ✓"}`, Progress{Current: 1, Message: "ünï ✓"}, false},
		{`{"total":10}`, Progress{}, true},
		{`{"current":"5"}`, Progress{}, true},
		{`{"current":1,"total":-1}`, Progress{}, true},
		{`5/10`, Progress{}, true},
		{``, Progress{}, true},
		{`[1,2]`, Progress{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, err := ParseProgress([]byte(tt.line))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got.Current != tt.want.Current || got.Total != tt.want.Total || got.Message != tt.want.Message || got.UpdatedAt.IsZero() {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	long, _ := ParseProgress([]byte(`{"current":1,"message":"` + strings.Repeat("é", 5000) + `"}`))
	if n := len([]rune(long.Message)); n != maxProgressMessage {
		t.Fatalf("message kept %d runes, want %d", n, maxProgressMessage)
	}
}

func TestReadProgressSkipsJunk(t *testing.T) {
	input := strings.Join([]string{
		`{"current":1,"total":3}`,
		`not json`,
		`{"current":2,"message":"` + strings.Repeat("x", maxProgressLine+10) + `"}`,
		``,
		`{"current":3,"total":3,"message":"done"}`,
	}, "\n") // the last line has no newline: still read at EOF
	var got []Progress
	if err := readProgress(strings.NewReader(input), func(p Progress) { got = append(got, p) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Current != 1 || got[1].Message != "done" {
		t.Fatalf("got %+v", got)
	}
}

func TestProgressFromPipeReachesJobAndSubscribers(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx := context.Background()
	j, _ := m.Start(ctx, code("x"), "")
	c := f.next(t)
	events, unsub, err := m.Subscribe(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	c.do(t, fakeStep{progress: `{"current":5,"total":10,"message":"half way"}` + "\n"})
	for ev := range events {
		if ev.Progress != nil {
			if ev.Progress.Current != 5 || ev.Progress.Total != 10 || ev.Progress.Message != "half way" {
				t.Fatalf("event progress = %+v", ev.Progress)
			}
			break
		}
	}
	got, _ := m.Get(ctx, j.ID)
	if got.Progress == nil || got.Progress.Current != 5 {
		t.Fatalf("job progress = %+v", got.Progress)
	}
	c.do(t, fakeStep{progress: `{"current":10,"total":10}` + "\n"})
	c.exit(t, 0)
	done := waitDone(t, m, j.ID)
	if done.Progress == nil || done.Progress.Current != 10 {
		t.Fatalf("final progress = %+v (the last report must be saved)", done.Progress)
	}
}

// TestPythonHelperWritesProtocol runs the embedded helper with a real
// python, when one is installed, against a pipe like the engine's.
func TestPythonHelperWritesProtocol(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	if err := writeHelper(dir); err != nil {
		t.Fatal(err)
	}
	if err := writeHelper(dir); err != nil { // idempotent
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(py, "-c", `
import pyexec_progress as p
assert p.report(1, 3, "one") is True
p.report(2)
p.report(3, 3, "x" * 5000)
`)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Dir = t.TempDir() // not this package dir, which holds the source copy
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir)
	cmd.Env = append(cmd.Env, RunOptions{ProgressPipe: w}.ProgressEnv(3)...)
	out, err := cmd.CombinedOutput()
	w.Close()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var got []Progress
	if err := readProgress(r, func(p Progress) { got = append(got, p) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Message != "one" || got[0].Total != 3 || got[1].Current != 2 || len(got[2].Message) != 1000 {
		t.Fatalf("got %+v", got)
	}
	// A subprocess whose fd 3 is some other file must not write into it.
	victim := filepath.Join(t.TempDir(), "victim")
	cmd = exec.Command(py, "-c", `
import os, pyexec_progress as p
fd = os.open(os.environ["VICTIM"], os.O_WRONLY | os.O_CREAT)
assert fd == 3, fd
assert p.report(1) is False
`)
	cmd.Dir = t.TempDir()
	r2, w2, _ := os.Pipe()
	defer r2.Close()
	defer w2.Close()
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "VICTIM="+victim)
	cmd.Env = append(cmd.Env, RunOptions{ProgressPipe: w2}.ProgressEnv(3)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python with an unrelated fd 3: %v\n%s", err, out)
	}
	if data, _ := os.ReadFile(victim); len(data) != 0 {
		t.Fatalf("helper wrote %q into an unrelated file", data)
	}
	// Without the variable the helper is a no-op.
	cmd = exec.Command(py, "-c", `import pyexec_progress as p; assert p.report(1) is False`)
	cmd.Env = []string{"PYTHONPATH=" + filepath.Clean(dir)}
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python without fd: %v\n%s", err, out)
	}
}

package engine

import (
	"encoding/json"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/launcher"
)

// A supervisor's status after the run's exit decides whether its warm
// interpreter serves another run: "clean" frees it, "dirty" (what the run
// left could not be removed) or nothing at all retires it. The run's own
// result is the exit event either way.
func TestWarmRunCleanupStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  []string // events after "exit"
		broken string   // "" when the zygote is released as is
	}{
		{"clean", []string{`{"kind":"clean"}`}, ""},
		{"dirty", []string{`{"kind":"dirty","error":"/dev/shm still holds 3 entries"}`}, "could not be removed: /dev/shm still holds 3 entries"},
		{"silent", nil, "did not report cleaning up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sv, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			unix.SetsockoptInt(sv[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
			unix.SetNonblock(sv[0], true)
			var broken string
			released := make(chan struct{})
			r := &warmRun{done: make(chan struct{}), pidfd: -1, clean: true, hooks: warmHooks{
				release: func() { close(released) },
				broken:  func(why string) { broken = why },
			}}
			go r.readStatus(os.NewFile(uintptr(sv[0]), "status"), nil)
			exit, _ := json.Marshal(launcher.Event{Kind: launcher.EventExit, ExitCode: 3})
			for _, m := range append([]string{`{"kind":"started","pid":7}`, string(exit)}, tc.after...) {
				if _, err := unix.Write(sv[1], []byte(m+"\n")); err != nil {
					t.Fatal(err)
				}
			}
			unix.Close(sv[1])
			ev, err := r.Wait()
			if err != nil || ev.ExitCode != 3 {
				t.Fatalf("Wait = %+v, %v; want the run's own exit", ev, err)
			}
			<-released
			if tc.broken == "" && broken != "" || tc.broken != "" && !strings.Contains(broken, tc.broken) {
				t.Errorf("broken = %q, want %q", broken, tc.broken)
			}
		})
	}
}

// The driver's table of pid-taking calls, which the seccomp layer of serial
// warm runs refuses for the fork server's pids, has this architecture's
// syscall numbers.
func TestDriverPidCallNumbers(t *testing.T) {
	col := map[string]int{"amd64": 0, "arm64": 1}[runtime.GOARCH]
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("no seccomp layer for " + runtime.GOARCH)
	}
	want := map[string]uintptr{
		"prlimit64": unix.SYS_PRLIMIT64, "sched_setaffinity": unix.SYS_SCHED_SETAFFINITY,
		"sched_setscheduler": unix.SYS_SCHED_SETSCHEDULER, "sched_setparam": unix.SYS_SCHED_SETPARAM,
		"sched_setattr": unix.SYS_SCHED_SETATTR, "setpriority": unix.SYS_SETPRIORITY, "ioprio_set": unix.SYS_IOPRIO_SET,
	}
	entry := regexp.MustCompile(`"(\w+)": \(\((\d+), (\d+)\)`)
	found := 0
	for _, m := range entry.FindAllStringSubmatch(string(driverSource), -1) {
		nr, ok := want[m[1]]
		if !ok {
			continue
		}
		found++
		if got, _ := strconv.Atoi(m[2+col]); uintptr(got) != nr {
			t.Errorf("driver.py: %s is %d here, not %d", m[1], nr, got)
		}
	}
	if found != len(want) {
		t.Errorf("driver.py lists %d of the %d calls", found, len(want))
	}
}

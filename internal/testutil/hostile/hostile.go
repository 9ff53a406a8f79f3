// Package hostile loads the adversarial corpus (testdata/hostile) and checks
// a run's outcome against its expectations, for every test that runs the
// corpus (the sandbox's own harness and the real engine). It imports no
// pyexec package, so the sandbox's internal tests can use it.
package hostile

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Case is one entry of testdata/hostile/expected.json.
type Case struct {
	Name    string   `json:"name"`
	Script  string   `json:"script"`
	Policy  string   `json:"policy"`
	Network string   `json:"network"`
	Args    []string `json:"args"`
	Timeout float64  `json:"timeout"`
	// Limits is the case's sandbox.Limits, decoded by the caller.
	Limits json.RawMessage `json:"limits"`
	Expect Expect          `json:"expect"`
}

// Expect is what a case's run must show; unset fields are not checked.
type Expect struct {
	ExitCode          *int     `json:"exit_code"`
	TimedOut          *bool    `json:"timed_out"`
	LimitExceeded     string   `json:"limit_exceeded"`
	StdoutContains    []string `json:"stdout_contains"`
	StdoutNotContains []string `json:"stdout_not_contains"`
	StderrContains    []string `json:"stderr_contains"`
	StdoutTruncated   *bool    `json:"stdout_truncated"`
	UDPReceived       *bool    `json:"udp_received"`
	// NoLeftovers asks the caller to check that no process, cgroup or temp
	// dir of the run remains (how depends on the caller).
	NoLeftovers bool `json:"no_leftovers"`
}

// Load reads the corpus; dir is where its scripts are. Callers live two
// levels below the module root (internal/<package>).
func Load(t testing.TB) (dir string, cases []Case) {
	t.Helper()
	dir = filepath.Join("..", "..", "testdata", "hostile")
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []Case `json:"cases"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return dir, f.Cases
}

// SecretFile writes the corpus's {secret_file}: a world-readable file
// outside the workspace and not under /tmp (which the workspace policy
// hides: /var/tmp is readable under it), removed when the test ends.
func SecretFile(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "pyexec-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	return secret
}

// Listeners are the host-side TCP and UDP endpoints the network cases try
// to reach.
type Listeners struct {
	tcp net.Listener
	udp net.PacketConn
}

// NewListeners listens on loopback until the test ends.
func NewListeners(t testing.TB) *Listeners {
	t.Helper()
	l := &Listeners{}
	var err error
	if l.tcp, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if l.udp, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.tcp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { l.tcp.Close(); l.udp.Close() })
	return l
}

// Args fills the placeholders of a case's arguments.
func (l *Listeners) Args(c Case, outsideDir, secretFile string) []string {
	repl := strings.NewReplacer(
		"{server_pid}", strconv.Itoa(os.Getpid()),
		"{tcp_port}", strconv.Itoa(l.tcp.Addr().(*net.TCPAddr).Port),
		"{udp_port}", strconv.Itoa(l.udp.LocalAddr().(*net.UDPAddr).Port),
		"{outside_dir}", outsideDir,
		"{secret_file}", secretFile,
	)
	var out []string
	for _, a := range c.Args {
		out = append(out, repl.Replace(a))
	}
	return out
}

// UDPReceived drains the UDP listener and says whether the corpus datagram
// arrived.
func (l *Listeners) UDPReceived() bool {
	got := false
	buf := make([]byte, 64)
	for {
		l.udp.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _, err := l.udp.ReadFrom(buf)
		if err != nil {
			return got
		}
		got = got || string(buf[:n]) == "hostile-udp"
	}
}

// Outcome is what a run showed, in the terms the expectations use.
type Outcome struct {
	ExitCode        int
	TimedOut        bool
	LimitExceeded   string
	Stdout, Stderr  string
	StdoutTruncated bool
	StdoutBytes     int64
	// Extra is added to failure messages (sandbox summary, notes...).
	Extra string
}

func (o Outcome) String() string {
	so, se := o.Stdout, o.Stderr
	if len(so) > 400 {
		so = so[:400] + "..."
	}
	if len(se) > 400 {
		se = "..." + se[len(se)-400:]
	}
	return "exit=" + strconv.Itoa(o.ExitCode) + " timed_out=" + strconv.FormatBool(o.TimedOut) +
		" limit=" + o.LimitExceeded + " " + o.Extra + " stdout=" + strconv.Quote(so) + " stderr=" + strconv.Quote(se)
}

// Check reports every expectation of e that o does not meet.
func (e Expect) Check(t testing.TB, o Outcome, l *Listeners) {
	t.Helper()
	if e.ExitCode != nil && o.ExitCode != *e.ExitCode {
		t.Errorf("exit code %d, want %d: %s", o.ExitCode, *e.ExitCode, o)
	}
	if e.TimedOut != nil && o.TimedOut != *e.TimedOut {
		t.Errorf("timed_out %v, want %v: %s", o.TimedOut, *e.TimedOut, o)
	}
	if o.LimitExceeded != e.LimitExceeded {
		t.Errorf("limit_exceeded %q, want %q: %s", o.LimitExceeded, e.LimitExceeded, o)
	}
	for _, s := range e.StdoutContains {
		if !strings.Contains(o.Stdout, s) {
			t.Errorf("stdout lacks %q: %s", s, o)
		}
	}
	for _, s := range e.StdoutNotContains {
		if strings.Contains(o.Stdout, s) {
			t.Errorf("stdout has %q: %s", s, o)
		}
	}
	for _, s := range e.StderrContains {
		if !strings.Contains(o.Stderr, s) {
			t.Errorf("stderr lacks %q: %s", s, o)
		}
	}
	if e.StdoutTruncated != nil && o.StdoutTruncated != *e.StdoutTruncated {
		t.Errorf("stdout truncated %v (%d bytes), want %v", o.StdoutTruncated, o.StdoutBytes, *e.StdoutTruncated)
	}
	if e.UDPReceived != nil {
		if got := l.UDPReceived(); got != *e.UDPReceived {
			t.Errorf("udp received %v, want %v: %s", got, *e.UDPReceived, o)
		}
	}
}

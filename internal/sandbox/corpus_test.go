package sandbox

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// HostileCase is one entry of testdata/hostile/expected.json. The engine's
// corpus test can decode the same file with this shape.
type HostileCase struct {
	Name    string   `json:"name"`
	Script  string   `json:"script"`
	Policy  Policy   `json:"policy"`
	Network Network  `json:"network"`
	Args    []string `json:"args"`
	Timeout float64  `json:"timeout"`
	Limits  Limits   `json:"limits"`
	Expect  struct {
		ExitCode          *int     `json:"exit_code"`
		TimedOut          *bool    `json:"timed_out"`
		LimitExceeded     string   `json:"limit_exceeded"`
		StdoutContains    []string `json:"stdout_contains"`
		StdoutNotContains []string `json:"stdout_not_contains"`
		StderrContains    []string `json:"stderr_contains"`
		StdoutTruncated   *bool    `json:"stdout_truncated"`
		UDPReceived       *bool    `json:"udp_received"`
		NoLeftovers       bool     `json:"no_leftovers"`
	} `json:"expect"`
}

func loadCorpus(t *testing.T) (dir string, cases []HostileCase) {
	dir = filepath.Join("..", "..", "testdata", "hostile")
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []HostileCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return dir, f.Cases
}

// hostListeners are the host-side TCP and UDP endpoints the network cases
// try to reach.
type hostListeners struct {
	tcp net.Listener
	udp net.PacketConn
}

func newHostListeners(t *testing.T) *hostListeners {
	h := &hostListeners{}
	var err error
	if h.tcp, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if h.udp, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := h.tcp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { h.tcp.Close(); h.udp.Close() })
	return h
}

// udpReceived drains the UDP listener and says whether the corpus datagram
// arrived.
func (h *hostListeners) udpReceived() bool {
	got := false
	buf := make([]byte, 64)
	for {
		h.udp.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _, err := h.udp.ReadFrom(buf)
		if err != nil {
			return got
		}
		if string(buf[:n]) == "hostile-udp" {
			got = true
		}
	}
}

func TestHostileCorpus(t *testing.T) {
	needPython(t)
	dir, cases := loadCorpus(t)
	h := newHostListeners(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			runHostile(t, dir, c, h)
		})
	}
}

// TestHostileConcurrent runs a fork bomb, a memory bomb and a daemon at the
// same time: none may disturb the others or leave anything behind.
func TestHostileConcurrent(t *testing.T) {
	needPython(t)
	dir, cases := loadCorpus(t)
	h := newHostListeners(t)
	want := map[string]bool{"fork_bomb": true, "memory_bomb": true, "daemon_strict": true, "write_outside_workspace": true}
	var wg sync.WaitGroup
	for _, c := range cases {
		if !want[c.Name] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(c.Name, func(t *testing.T) { runHostile(t, dir, c, h) })
		}()
	}
	wg.Wait()
}

func runHostile(t *testing.T, dir string, c HostileCase, h *hostListeners) {
	e := newEnv(t)
	src, err := os.ReadFile(filepath.Join(dir, c.Script))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(e.ws, c.Script)
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	repl := strings.NewReplacer(
		"{server_pid}", strconv.Itoa(os.Getpid()),
		"{tcp_port}", strconv.Itoa(h.tcp.Addr().(*net.TCPAddr).Port),
		"{udp_port}", strconv.Itoa(h.udp.LocalAddr().(*net.UDPAddr).Port),
		"{outside_dir}", e.outside,
		"{secret_file}", e.secret,
	)
	argv := []string{python, "-S", script}
	for _, a := range c.Args {
		argv = append(argv, repl.Replace(a))
	}
	spec := e.spec(c.Policy)
	spec.Network = c.Network
	spec.Limits = c.Limits
	timeout := time.Duration(c.Timeout * float64(time.Second))
	res := sandboxedT(t, spec, timeout+30*time.Second, timeout, argv...)
	if res.StartErr != "" {
		t.Fatalf("start: %s", res.StartErr)
	}
	limit := LimitFromStderr(res.Report, res.Stderr, res.Exit)
	ex := c.Expect
	show := func() string {
		so := res.Stdout
		if len(so) > 400 {
			so = so[:400] + "..."
		}
		se := res.Stderr
		if len(se) > 400 {
			se = se[len(se)-400:]
		}
		return "exit=" + strconv.Itoa(res.Exit) + " timed_out=" + strconv.FormatBool(res.TimedOut) +
			" limit=" + limit + " stdout=" + strconv.Quote(so) + " stderr=" + strconv.Quote(se)
	}
	if ex.ExitCode != nil && res.Exit != *ex.ExitCode {
		t.Errorf("exit code %d, want %d: %s", res.Exit, *ex.ExitCode, show())
	}
	if ex.TimedOut != nil && res.TimedOut != *ex.TimedOut {
		t.Errorf("timed_out %v, want %v: %s", res.TimedOut, *ex.TimedOut, show())
	}
	if ex.LimitExceeded != limit {
		t.Errorf("limit_exceeded %q, want %q: %s", limit, ex.LimitExceeded, show())
	}
	for _, s := range ex.StdoutContains {
		if !strings.Contains(res.Stdout, s) {
			t.Errorf("stdout lacks %q: %s", s, show())
		}
	}
	for _, s := range ex.StdoutNotContains {
		if strings.Contains(res.Stdout, s) {
			t.Errorf("stdout has %q: %s", s, show())
		}
	}
	for _, s := range ex.StderrContains {
		if !strings.Contains(res.Stderr, s) {
			t.Errorf("stderr lacks %q: %s", s, show())
		}
	}
	if ex.StdoutTruncated != nil && res.StdoutTruncated != *ex.StdoutTruncated {
		t.Errorf("stdout truncated %v (%d bytes), want %v", res.StdoutTruncated, res.StdoutBytes, *ex.StdoutTruncated)
	}
	if ex.UDPReceived != nil {
		if got := h.udpReceived(); got != *ex.UDPReceived {
			t.Errorf("udp received %v, want %v: %s", got, *ex.UDPReceived, show())
		}
	}
	if ex.NoLeftovers {
		if left := procsMentioning(e.ws); len(left) > 0 {
			t.Errorf("processes outlived the run: %v", left)
		}
		// Exact run id: concurrent runs of this test may still be going.
		noCgroupLeftFor(t, res.RunID)
	}
}

// procsMentioning lists live processes whose command line contains s.
func procsMentioning(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(cmd), s) {
			out = append(out, pid)
		}
	}
	return out
}

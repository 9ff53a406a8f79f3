//go:build linux

package engine

// Session interpreters: one long-lived run whose script is the session
// driver (session_driver.py), fed cells over a socket on fd 3.
//
// A session is started exactly as a run is (prepare, then startProcess:
// warm when a warm run could be, else cold), so it is confined exactly
// like one: same policy and run-as user, Landlock, namespaces, seccomp, its
// own cgroup whose memory and process limits hold for the whole session,
// and a private temp dir. On the warm path the fork server that served it
// is taken out of the pool for good (Extras.Dedicated): the session has
// that fork server's PID and IPC namespaces to itself, and the pool starts
// a replacement in the background. Everything a cell starts is in the
// run's process tree and cgroup, and dies with the session.

import (
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/sandbox"
)

//go:embed session_driver.py
var sessionDriverSource string

// SessionProcess is one live session interpreter.
type SessionProcess struct {
	e      *Engine
	conn   *net.UnixConn
	cancel context.CancelFunc

	pid     int // the interpreter, in this server's PID namespace
	python  string
	started time.Time

	msgs     chan sessionMsg // from the driver; closed when the socket closes
	readDone chan struct{}   // closed when the reader has stopped

	done     chan struct{} // closed once the run is over
	final    Result
	finalErr error

	wmu  sync.Mutex   // one frame at a time on conn
	cell atomic.Int64 // the cell last sent (what an interrupt is for)

	// Set once the run is prepared (before the interpreter starts): what
	// installs into the session's overlay need.
	req      Request
	prep     *prepared
	prepOnce chan struct{}

	mu         sync.Mutex
	killReason string        // why the server ended it (empty: it ended by itself)
	interrupts chan struct{} // an interrupt was sent to the running cell
	proc       *os.Process
}

// sessionMsg is one frame from the driver.
type sessionMsg struct {
	Kind        string     `json:"kind"`
	N           int        `json:"n"`
	PID         int        `json:"pid"`
	Python      string     `json:"python"`
	Result      *string    `json:"result"`
	Error       *CellError `json:"error"`
	Interrupted bool       `json:"interrupted"`
	Code        int        `json:"code"`
	Outputs     int        `json:"outputs"` // display records the cell left (sessionCellDir)
}

// StartSession starts a session interpreter for req (its code is ignored:
// the session driver runs instead) that lives at most lifetime. ctx bounds
// the start only.
func (e *Engine) StartSession(ctx context.Context, req Request, lifetime time.Duration) (*SessionProcess, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("session socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "session-ctl"), os.NewFile(uintptr(fds[1]), "session-ctl-child")
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("session socket: %w", err)
	}
	req.Code, req.ScriptPath, req.Args, req.Stdin = sessionDriverSource, "", nil, ""
	runCtx, cancel := context.WithCancel(context.Background())
	sp := &SessionProcess{e: e, conn: fc.(*net.UnixConn), cancel: cancel, msgs: make(chan sessionMsg, 4), readDone: make(chan struct{}),
		done: make(chan struct{}), interrupts: make(chan struct{}, 1), started: time.Now(), req: req, prepOnce: make(chan struct{})}
	pidc := make(chan int, 1)
	obs := sessionObserver{started: func(pid int) {
		select {
		case pidc <- pid:
		default:
		}
	}}
	e.live.add(sp)
	go func() {
		defer close(sp.done)
		defer e.live.remove(sp)
		x := Extras{Timeout: lifetime, ExtraFiles: []*os.File{theirs}, Dedicated: true,
			tmpEnv: e.sessionEnv(&req), ReadOnly: e.sessionReadable(),
			prepared: func(p *prepared) { sp.prep = p; close(sp.prepOnce) }}
		res, err := e.RunWith(runCtx, req, obs, x)
		theirs.Close()
		sp.final, sp.finalErr = res, err
		// What the interpreter wrote before it ended (a cell's exit
		// message) is still in the socket: closing it now would drop
		// that. A deadline lets the reader take it, and ends the reader
		// even when another process still holds the other end.
		_ = sp.conn.SetReadDeadline(time.Now().Add(cellDrain))
		select {
		case <-sp.readDone:
		case <-time.After(drainGrace): // the reader is stuck handing over a message nobody takes
		}
		sp.conn.Close()
	}()
	go sp.read()

	fail := func(err error) (*SessionProcess, error) {
		sp.Kill("start failed")
		<-sp.done
		return nil, err
	}
	var ready sessionMsg
	select {
	case m, ok := <-sp.msgs:
		if !ok || m.Kind != "ready" {
			<-sp.done
			if sp.finalErr != nil {
				return nil, sp.finalErr
			}
			why := strings.TrimSpace(sp.final.Stderr)
			if why == "" {
				why = "exit status " + strconv.Itoa(sp.final.ExitCode)
			}
			return nil, fmt.Errorf("the session interpreter did not start: %s", why)
		}
		ready = m
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	select {
	case sp.pid = <-pidc:
	case <-sp.done:
		return nil, fmt.Errorf("the session interpreter exited at once: %s", strings.TrimSpace(sp.final.Stderr))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	sp.python = ready.Python
	if p, err := os.FindProcess(sp.pid); err == nil {
		sp.proc = p // a pidfd on Linux: never a recycled pid
	}
	return sp, nil
}

type sessionObserver struct{ started func(int) }

func (o sessionObserver) Started(pid int)           { o.started(pid) }
func (o sessionObserver) Output(s Stream, p []byte) {}

// maxSessionFrame bounds one frame from the driver (a cell's result repr is
// cut at 1 MiB there).
const maxSessionFrame = 8 << 20

func (sp *SessionProcess) read() {
	defer close(sp.readDone)
	defer close(sp.msgs)
	var head [4]byte
	for {
		if _, err := io.ReadFull(sp.conn, head[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(head[:])
		if n > maxSessionFrame {
			sp.Kill("the session sent a malformed message")
			return
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(sp.conn, buf); err != nil {
			return
		}
		var m sessionMsg
		if json.Unmarshal(buf, &m) != nil {
			continue
		}
		sp.msgs <- m
	}
}

// PID is the interpreter's pid (in the server's PID namespace).
func (sp *SessionProcess) PID() int { return sp.pid }

// Python is the interpreter's version.
func (sp *SessionProcess) Python() string { return sp.python }

// Done is closed once the interpreter and its whole tree are gone.
func (sp *SessionProcess) Done() <-chan struct{} { return sp.done }

// End is how the run ended (after Done): the server's reason when it killed
// it, the run's result, and an error when it could not be run at all.
func (sp *SessionProcess) End() (killReason string, res Result, err error) {
	<-sp.done
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.killReason, sp.final, sp.finalErr
}

// Kill ends the session's whole tree (TERM, a grace, KILL), remembering
// why (the first reason wins).
func (sp *SessionProcess) Kill(reason string) {
	sp.mu.Lock()
	if sp.killReason == "" {
		sp.killReason = reason
	}
	sp.mu.Unlock()
	sp.cancel()
}

// Interrupt raises KeyboardInterrupt in the running cell (SIGINT to the
// interpreter; between cells the driver ignores it). RunCell then gives the
// cell grace to stop before it kills the session.
func (sp *SessionProcess) Interrupt() error {
	if err := sp.sigint(); err != nil {
		return err
	}
	select {
	case sp.interrupts <- struct{}{}:
	default:
	}
	return nil
}

// sigint interrupts the running cell: an "I<n>" frame naming it first,
// then SIGINT. The frame lets the driver tell an interrupt that came
// before the cell's first instruction (kept) from one that came after the
// cell it was for had ended (dropped).
func (sp *SessionProcess) sigint() error {
	if sp.proc == nil {
		return errors.New("the session's process is not known")
	}
	frame := []byte("I" + strconv.Itoa(int(sp.cell.Load())))
	var head [4]byte
	binary.BigEndian.PutUint32(head[:], uint32(len(frame)))
	sp.wmu.Lock()
	_, err := sp.conn.Write(append(head[:], frame...))
	sp.wmu.Unlock()
	if err != nil {
		return ErrSessionEnded
	}
	if err := sp.proc.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("interrupt: %w", err)
	}
	return nil
}

// Memory reports the interpreter's resident set now and its peak (bytes),
// from /proc; zeros when it is gone.
func (sp *SessionProcess) Memory() (now, peak int64) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(sp.pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			now = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return now, peak
}

// cellDrain bounds how long a cell's output is still read after the cell
// ended: only a process the cell left running can keep its pipes open.
const cellDrain = 250 * time.Millisecond

// RunCell runs one cell (number n) and returns what it produced. timeout
// and a cancelled ctx interrupt the cell; when it has not stopped grace
// later, the session is killed (reason "timeout" or "interrupt_failed") and
// the error is ErrSessionEnded. An interrupt (Interrupt) gets the same
// grace. obs, when set, hears the cell's output as it comes (a job-backed
// cell's logs).
func (sp *SessionProcess) RunCell(ctx context.Context, n int, code string, timeout, grace time.Duration, obs Observer) (CellResult, error) {
	select {
	case <-sp.done:
		return CellResult{}, ErrSessionEnded
	default:
	}
	select { // an interrupt sent between cells is void
	case <-sp.interrupts:
	default:
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return CellResult{}, fmt.Errorf("cell stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return CellResult{}, fmt.Errorf("cell stderr pipe: %w", err)
	}
	body := append([]byte("C"+strconv.Itoa(n)+"\n"), code...)
	var head [4]byte
	binary.BigEndian.PutUint32(head[:], uint32(len(body)))
	start := time.Now()
	hitsBefore, _ := sessionPids(sp.pid)
	span := sp.e.watch.Begin() // before the cell can write anything
	sp.wmu.Lock()
	sp.cell.Store(int64(n))
	_, _, werr := sp.conn.WriteMsgUnix(head[:], unix.UnixRights(int(outW.Fd()), int(errW.Fd())), nil)
	outW.Close()
	errW.Close()
	if werr == nil {
		_, werr = sp.conn.Write(body)
	}
	sp.wmu.Unlock()
	if werr != nil {
		outR.Close()
		errR.Close()
		span.End(sp.prep.rights)
		return CellResult{}, ErrSessionEnded
	}
	stdout, stderr := newCapture(sp.e.cfg.OutputCap), newCapture(sp.e.cfg.OutputCap)
	var readers sync.WaitGroup
	readers.Add(2)
	go pump(&readers, outR, stdout, Stdout, obs)
	go pump(&readers, errR, stderr, Stderr, obs)

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var graceC <-chan time.Time
	var timedOut bool
	lostReason := ""
	interrupt := func(reason string) {
		if graceC != nil {
			return
		}
		if lostReason == "" {
			lostReason = reason
		}
		_ = sp.sigint()
		graceC = time.After(grace)
	}
	ctxDone := ctx.Done()
	var msg sessionMsg
	got := false
wait:
	for {
		select {
		case m, ok := <-sp.msgs:
			if !ok {
				break wait
			}
			if (m.Kind == "done" || m.Kind == "exit") && m.N == n {
				msg, got = m, true
				break wait
			}
		case <-timer.C:
			timedOut = true
			interrupt("timeout")
		case <-ctxDone:
			ctxDone = nil
			interrupt("interrupt_failed")
		case <-sp.interrupts:
			lostReason = "interrupt_failed"
			graceC = time.After(grace)
		case <-graceC:
			if _, full := sessionPids(sp.pid); full {
				// A fork bomb: the reason the session is lost is its
				// process limit, whether or not its first process heeded
				// the interrupt.
				lostReason = sandbox.LimitProcesses
			}
			sp.Kill(lostReason)
			graceC = nil
		case <-sp.done:
			// The reader may still hold the interpreter's last
			// message (sys.exit's): the end and it race.
			msg, got = sp.lastWord(n)
			break wait
		}
	}
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	wait := cellDrain
	if !got {
		wait = drainGrace
	}
	select {
	case <-drained:
	case <-time.After(wait):
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()

	res := CellResult{ElapsedSeconds: time.Since(start).Seconds(), TimedOut: timedOut,
		StdoutBytes: stdout.Total(), StderrBytes: stderr.Total()}
	if timedOut {
		fmt.Fprintf(stderr, "\n[TIMEOUT] the cell was interrupted after %.1fs (timeout %gs)\n", res.ElapsedSeconds, timeout.Seconds())
	}
	res.Stdout, res.StdoutTruncated = stdout.Text()
	res.Stderr, res.StderrTruncated = stderr.Text()
	changes, note := span.End(sp.prep.rights)
	res.Files, res.FilesNote = fileChanges(changes), note
	res.Sandbox = sandboxSummary(sp.prep.sandbox)
	if !got {
		return res, ErrSessionEnded
	}
	if msg.Kind == "done" && sessionForkBomb(sp.pid, hitsBefore) {
		// What the cell forked still fills the session's process limit
		// (a fork bomb goes on after its first process was interrupted):
		// nothing more could run in it, and those processes would spin
		// on until the session's lifetime ends.
		sp.Kill(sandbox.LimitProcesses)
		<-sp.done
		return res, ErrSessionEnded
	}
	res.Result, res.Error, res.Interrupted = msg.Result, msg.Error, msg.Interrupted
	if msg.Outputs > 0 {
		o := collectOutputsIn(sessionCellDir(sp.prep.tmpDir, n), tmpRights(sp.prep.tmpDir))
		res.Display, res.OutputNotes = o.Display, o.OutputNotes
	}
	if res.Error != nil {
		res.LimitExceeded = cellLimit(res.Error)
	}
	if msg.Kind == "exit" {
		code := msg.Code
		res.Exited = &code
	}
	return res, nil
}

// lastWord returns cell n's final message among those the reader still
// delivers once the interpreter has ended; msgs is closed when the reader
// has drained the socket.
func (sp *SessionProcess) lastWord(n int) (sessionMsg, bool) {
	for m := range sp.msgs {
		if (m.Kind == "done" || m.Kind == "exit") && m.N == n {
			return m, true
		}
	}
	return sessionMsg{}, false
}

// sessionCellDir is where the session driver has pyexec_rt record cell n's
// displays (the driver removes it when the next cell starts).
func sessionCellDir(tmpDir string, n int) string {
	return filepath.Join(outputDir(tmpDir), "cell-"+strconv.Itoa(n))
}

// cellLimit names the resource limit a cell's exception comes from, as
// sandbox.LimitFromStderr does for a run's stderr: a limit that only fails
// a call (a file too large, a fork refused, an allocation refused) ends the
// cell, not the session.
func cellLimit(e *CellError) string {
	text := e.Ename + ": " + e.Evalue + "\n" + e.Traceback
	switch {
	case strings.Contains(text, "[Errno 27] File too large"):
		return sandbox.LimitFileSize
	case e.Ename == "MemoryError":
		return sandbox.LimitMemory
	case strings.Contains(text, "[Errno 11] Resource temporarily unavailable") || strings.Contains(text, "can't start new thread"):
		return sandbox.LimitProcesses
	}
	return ""
}

// sessionForkBomb says whether what a cell left running still presses on
// the session's process limit: the limit was hit during the cell (its
// pids cgroup's "max" events grew since hitsBefore), and it is still full
// or still being hit within a quarter second after the cell ended. A cell that hit
// the limit and cleaned up after itself keeps its session.
func sessionForkBomb(pid int, hitsBefore int64) bool {
	hits, full := sessionPids(pid)
	if hits <= hitsBefore {
		return false
	}
	for range 25 { // a loaded machine may not run the bomb's processes at once
		if full {
			return true
		}
		time.Sleep(10 * time.Millisecond)
		var now int64
		if now, full = sessionPids(pid); now > hits {
			return true
		}
	}
	return full
}

// sessionPids reads the pids cgroup of the session interpreter pid: how
// often a fork was refused at its limit, and whether it is at its limit
// now (zero and false when it has none, or is not known).
func sessionPids(pid int) (maxHits int64, full bool) {
	dir := processCgroup(pid, "pids")
	if dir == "" {
		return 0, false
	}
	read := func(name string) (int64, bool) {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, false
		}
		text := strings.TrimSpace(string(raw))
		if name == "pids.events" {
			line, _, _ := strings.Cut(text, "\n") // "max N" (v2 may add other keys)
			text = strings.TrimSpace(strings.TrimPrefix(line, "max"))
		}
		n, err := strconv.ParseInt(text, 10, 64)
		return n, err == nil
	}
	maxHits, _ = read("pids.events")
	limit, limited := read("pids.max") // "max": no limit
	cur, ok := read("pids.current")
	return maxHits, limited && ok && cur >= limit
}

// processCgroup is the directory of pid's cgroup for controller: its v1
// hierarchy's when the controller has one, else the v2 one; "" when pid
// is gone.
func processCgroup(pid int, controller string) string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	v2 := ""
	for _, line := range strings.Split(string(raw), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if slices.Contains(strings.Split(parts[1], ","), controller) {
			return filepath.Join("/sys/fs/cgroup", parts[1], parts[2])
		}
		if parts[0] == "0" {
			v2 = filepath.Join("/sys/fs/cgroup", parts[2])
		}
	}
	return v2
}

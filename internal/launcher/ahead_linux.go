package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// AheadCommand is the argv[1] of a launcher started before its run exists
// (see Pool): exec'd, its Go runtime up and a subreaper already, it waits
// on fd 3, its control socket, for the one run it will ever serve.
const AheadCommand = "__pyexec_launch_ahead"

// The fds of a launcher started ahead: the control socket, and
// placeholders (/dev/null) at statusFD and extraFD..extraFD+aheadExtra-1.
// The placeholders keep those numbers taken from the exec on, so that
// nothing the Go runtime opens meanwhile (the netpoller's epoll fd, its
// wakeup eventfd) can land there and be overwritten when the run's files
// are moved into place.
const (
	controlFD  = 3
	aheadExtra = 4 // most Spec.ExtraFiles a launcher started ahead takes
	// maxHandoff bounds the spec's JSON (argv, env, sandbox paths).
	maxHandoff = 8 << 20
)

// The run's files, in the order the server sends them: stdin, stdout,
// stderr, the status pipe, then the extra files.
const handoffFixed = 4

// awaitRun blocks until the server hands this launcher its run, or retires
// it (closes the control socket, or signals it) first. On success the
// run's files are at fds 0, 1, 2, statusFD and extraFD+i, and the control
// socket is closed: the launcher cannot be handed a second run.
func awaitRun(sigs <-chan os.Signal) (spec Spec, retired bool, err error) {
	type result struct {
		spec Spec
		fds  []int
		err  error
	}
	got := make(chan result, 1)
	go func() {
		s, fds, err := receiveRun(controlFD)
		got <- result{s, fds, err}
	}()
	var r result
	select {
	case <-sigs:
		// Told to go (server closing, or gone: Pdeathsig) before any run
		// came; nothing to clean up.
		return Spec{}, true, nil
	case r = <-got:
	}
	unix.Close(controlFD)
	if errors.Is(r.err, errRetired) {
		return Spec{}, true, nil
	}
	if r.err != nil {
		for _, fd := range r.fds {
			unix.Close(fd)
		}
		return Spec{}, false, r.err
	}
	if len(r.fds) != handoffFixed+r.spec.ExtraFiles || r.spec.ExtraFiles > aheadExtra {
		return Spec{}, false, fmt.Errorf("launch handoff: %d files for %d extra files", len(r.fds), r.spec.ExtraFiles)
	}
	targets := []int{0, 1, 2, statusFD}
	for i := range r.spec.ExtraFiles {
		targets = append(targets, extraFD+i)
	}
	// Received fds got the lowest free numbers, which may be targets of
	// another one (a placeholder closed by nobody is never free, but 0-2
	// could be after a dup3): move them all above the targets first.
	high := make([]int, len(r.fds))
	for i, fd := range r.fds {
		h, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, extraFD+aheadExtra+16)
		if err != nil {
			return Spec{}, false, fmt.Errorf("launch handoff: move fd: %w", err)
		}
		unix.Close(fd)
		high[i] = h
	}
	for i, h := range high {
		if err := unix.Dup3(h, targets[i], 0); err != nil {
			return Spec{}, false, fmt.Errorf("launch handoff: place fd %d: %w", targets[i], err)
		}
		unix.Close(h)
	}
	return r.spec, false, nil
}

// aheadArgs are the arguments after AheadCommand that tell a launcher
// started ahead whom its run will likely execute as ("UID:GID"), so it can
// make that user's idmapping ahead (sandbox.Ahead).
func aheadArgs(cred *sandbox.Credential) []string {
	if cred == nil {
		return nil
	}
	return []string{fmt.Sprintf("%d:%d", cred.UID, cred.GID)}
}

// aheadCred parses aheadArgs; nil when there is none or it is malformed.
func aheadCred(args []string) *sandbox.Credential {
	if len(args) != 1 {
		return nil
	}
	var c sandbox.Credential
	if n, err := fmt.Sscanf(args[0], "%d:%d", &c.UID, &c.GID); err != nil || n != 2 {
		return nil
	}
	return &c
}

var errRetired = errors.New("retired before a run came")

// receiveRun reads the handoff from the control socket: one byte carrying
// the run's fds (SCM_RIGHTS), then the spec as JSON up to EOF. It uses
// plain blocking system calls, not the netpoller, so no fd of the runtime's
// appears while the handoff is in flight.
func receiveRun(fd int) (Spec, []int, error) {
	if err := unix.SetNonblock(fd, false); err != nil {
		return Spec{}, nil, fmt.Errorf("launch handoff: %w", err)
	}
	one := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*(handoffFixed+aheadExtra)))
	var (
		n, oobn int
		err     error
	)
	for {
		n, oobn, _, _, err = unix.Recvmsg(fd, one, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return Spec{}, nil, fmt.Errorf("launch handoff: %w", err)
	}
	if n == 0 {
		return Spec{}, nil, errRetired
	}
	var fds []int
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return Spec{}, nil, fmt.Errorf("launch handoff: %w", err)
	}
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			return Spec{}, fds, fmt.Errorf("launch handoff: %w", err)
		}
		fds = append(fds, got...)
	}
	var body []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Spec{}, fds, fmt.Errorf("launch handoff: read spec: %w", err)
		}
		if n == 0 {
			break
		}
		body = append(body, buf[:n]...)
		if len(body) > maxHandoff {
			return Spec{}, fds, fmt.Errorf("launch handoff: spec larger than %d bytes", maxHandoff)
		}
	}
	var spec Spec
	if err := json.Unmarshal(body, &spec); err != nil {
		return Spec{}, fds, fmt.Errorf("read launch spec: %w", err)
	}
	return spec, fds, nil
}

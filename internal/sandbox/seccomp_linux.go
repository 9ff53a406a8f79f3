package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A small seccomp filter, installed on the starter thread right before
// Python is forked (the child inherits it, and so does every fork of a warm
// interpreter). It is defense in depth beside Landlock, the namespaces and
// the cgroup: it removes kernel attack surface no Python program needs and
// privileged operations a run must never attempt, including when it runs as
// root without capabilities.
//
//   - namespaces: unshare, setns, and clone with any CLONE_NEW* flag (a run
//     must not build its own user namespace to regain capabilities in it);
//     clone3 answers ENOSYS so libc falls back to clone, whose flags a
//     classic BPF filter can inspect (clone3 passes them in memory);
//   - kernel surface: bpf, perf_event_open, userfaultfd, io_uring_*, the key
//     ring (keyctl, add_key, request_key);
//   - privileged: modules, kexec, reboot, swap, accounting, mounts;
//   - set-user-ID and set-group-ID files and device nodes: chmod, fchmod,
//     fchmodat and fchmodat2 with S_ISUID or S_ISGID in the mode; open,
//     openat and creat creating a file with either bit; mkdir and mkdirat
//     with either; mknod and mknodat of a character or block device or with
//     either bit. Through the idmapped workspace a file a run makes is the
//     server's on disk, so a setuid copy of an interpreter would be a setuid
//     root binary for every local user. openat2 passes its mode in memory,
//     where the filter cannot see it: it answers ENOSYS, and libc and Python
//     use openat.
//
// Denied calls fail with EPERM (ENOSYS for clone3 and openat2); nothing is
// killed, so a program probing for a feature degrades instead of crashing.
// Only x86_64 and arm64 are filtered; x32 syscalls are denied outright.

// seccomp_data offsets.
const (
	seccompNR   = 0
	seccompArch = 4
	seccompArgs = 16 // args[i] at 16+8*i; the low 32 bits come first on little-endian
)

func seccompArg(i int) uint32 { return uint32(seccompArgs + 8*i) }

const (
	auditArchX86_64  = 0xc000003e
	auditArchAarch64 = 0xc00000b7
	x32SyscallBit    = 0x40000000
	// CLONE_NEW* flags valid for clone(2) (CLONE_NEWTIME collides with the
	// exit signal byte there and is clone3/unshare-only).
	cloneNewMask = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	setIDBits = unix.S_ISUID | unix.S_ISGID
	// oTmpfile is the bit that makes open create an unnamed file (O_TMPFILE
	// also carries O_DIRECTORY, which alone creates nothing).
	oTmpfile = unix.O_TMPFILE &^ unix.O_DIRECTORY
)

// deniedSyscalls fail with EPERM.
var deniedSyscalls = []uint32{
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
	unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
}

// modeRule denies a syscall whose mode argument asks for a set-user-ID or
// set-group-ID file (or, with device, a device node).
type modeRule struct {
	nr uint32
	// mode is the index of the mode argument; flags, when >= 0, the index
	// of open flags: the mode only counts when they create a file.
	mode, flags int
	device      bool
}

// modeRules holds the calls every architecture has; legacyModeRules (per
// architecture file) adds the old path-based ones (chmod, open, ...).
var modeRules = append([]modeRule{
	{nr: unix.SYS_FCHMOD, mode: 1, flags: -1},
	{nr: unix.SYS_FCHMODAT, mode: 2, flags: -1},
	{nr: unix.SYS_FCHMODAT2, mode: 2, flags: -1},
	{nr: unix.SYS_OPENAT, mode: 3, flags: 2},
	{nr: unix.SYS_MKDIRAT, mode: 2, flags: -1},
	{nr: unix.SYS_MKNODAT, mode: 2, flags: -1, device: true},
}, legacyModeRules...)

func seccompArchValue() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return auditArchX86_64, true
	case "arm64":
		return auditArchAarch64, true
	}
	return 0, false
}

// seccompProgram builds the filter. allowCloneNS keeps clone's namespace
// flags usable (the unprivileged network-deny path clones Python into a new
// user+network namespace under this very filter); allowClone3 keeps clone3
// (Go uses it for CLONE_INTO_CGROUP on cgroup v2).
func seccompProgram(allowCloneNS, allowClone3 bool) ([]unix.SockFilter, error) {
	arch, ok := seccompArchValue()
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		and  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	allow := unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW}
	eperm := unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}
	enosys := unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)}
	loadNR := unix.SockFilter{Code: ldW, K: seccompNR}

	var p []unix.SockFilter
	// Wrong architecture (e.g. a 32-bit binary): deny everything.
	p = append(p,
		unix.SockFilter{Code: ldW, K: seccompArch},
		unix.SockFilter{Code: jeq, K: arch, Jt: 1, Jf: 0},
		eperm,
		loadNR,
	)
	if runtime.GOARCH == "amd64" {
		p = append(p, unix.SockFilter{Code: jge, K: x32SyscallBit, Jt: 0, Jf: 1}, eperm)
	}
	for _, nr := range deniedSyscalls {
		p = append(p, unix.SockFilter{Code: jeq, K: nr, Jt: 0, Jf: 1}, eperm)
	}
	p = append(p, unix.SockFilter{Code: jeq, K: unix.SYS_OPENAT2, Jt: 0, Jf: 1}, enosys)
	if !allowClone3 {
		p = append(p, unix.SockFilter{Code: jeq, K: unix.SYS_CLONE3, Jt: 0, Jf: 1}, enosys)
	}
	// Each argument check below leaves the syscall number reloaded in the
	// accumulator for the next one.
	for _, r := range modeRules {
		var body []unix.SockFilter
		if r.flags >= 0 {
			// Not creating a file: the mode is ignored (skip to the reload).
			body = append(body,
				unix.SockFilter{Code: ldW, K: seccompArg(r.flags)},
				unix.SockFilter{Code: jset, K: unix.O_CREAT | oTmpfile, Jt: 0, Jf: 3},
			)
		}
		body = append(body,
			unix.SockFilter{Code: ldW, K: seccompArg(r.mode)},
			unix.SockFilter{Code: jset, K: setIDBits, Jt: 0, Jf: 1},
			eperm,
		)
		if r.device {
			body = append(body,
				unix.SockFilter{Code: and, K: unix.S_IFMT},
				unix.SockFilter{Code: jeq, K: unix.S_IFCHR, Jt: 1, Jf: 0},
				unix.SockFilter{Code: jeq, K: unix.S_IFBLK, Jt: 0, Jf: 1},
				eperm,
			)
		}
		body = append(body, loadNR)
		p = append(p, unix.SockFilter{Code: jeq, K: r.nr, Jt: 0, Jf: uint8(len(body))})
		p = append(p, body...)
	}
	if !allowCloneNS {
		p = append(p,
			unix.SockFilter{Code: jeq, K: unix.SYS_CLONE, Jt: 0, Jf: 3},
			unix.SockFilter{Code: ldW, K: seccompArg(0)},
			unix.SockFilter{Code: jset, K: cloneNewMask, Jt: 0, Jf: 1},
			eperm,
		)
	}
	p = append(p, allow)
	if len(p) > 4096 {
		return nil, errors.New("seccomp program too long")
	}
	return p, nil
}

// installSeccomp loads the filter on the calling (locked) thread only; the
// child forked from it inherits it. no_new_privs must already be set.
func installSeccomp(allowCloneNS, allowClone3 bool) error {
	prog, err := seccompProgram(allowCloneNS, allowClone3)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("install seccomp filter: %w", err)
	}
	runtime.KeepAlive(prog)
	return nil
}

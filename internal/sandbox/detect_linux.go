package sandbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Detect probes the kernel for every mechanism. It starts two /bin/true
// children (PID and network namespace probes) and creates and removes a
// probe cgroup; it takes a few milliseconds and leaves nothing behind.
func Detect() Capabilities {
	c := Capabilities{UID: os.Geteuid()}
	c.Root = c.UID == 0
	c.Rlimits = Mechanism{Name: "rlimits", Available: true, Detail: "RLIMIT_NPROC/FSIZE/NOFILE/CPU (AS as memory fallback)"}
	if !c.Root {
		c.Rlimits.Detail += "; RLIMIT_NPROC counts all processes of the server's uid"
	}
	c.NoNewPrivs = detectNNP()
	c.Landlock, c.LandlockTCP, c.LandlockScope, c.LandlockABI = detectLandlock()
	c.NetNS = detectNamespace("net_namespace", syscall.CLONE_NEWNET, "no-network runs get an empty network namespace (loopback only): TCP, UDP and raw sockets cannot reach the host")
	c.PidNS = detectNamespace("pid_namespace", syscall.CLONE_NEWPID, "strict runs get their own PID namespace: every process dies with the run")
	c.MountNS = detectNamespace("mount_namespace", syscall.CLONE_NEWNS, "confined runs get a private /dev/shm and an IPC namespace of their own (multiprocessing works, nothing shared between runs, SysV and POSIX IPC die with the run); every mount nosuid, what a run writes also nodev; runs as an unprivileged uid see only what they need below 0700 dirs such as /root (bound into a tmpfs skeleton: keys, tokens, jobs.db, other runs' files do not exist for them) and write a server-owned workspace through an idmapped mount")
	if c.Root && c.PidNS.Available {
		if err := PrivateProcAvailable(); err != nil {
			c.PidNS = Mechanism{Name: "pid_namespace", Detail: "confined runs cannot get a /proc of their own: " + err.Error()}
		} else {
			c.PidNS.Detail = "every confined run gets its own PID namespace and /proc (hidepid): it sees and can signal, limit, renice or trace only its own processes, never other runs, warm interpreters or the server; every process dies with the run"
		}
	}
	if !c.Root {
		c.MountNS = Mechanism{Name: "mount_namespace", Detail: "needs a root server: runs share the host's /dev/shm and IPC namespace (strict: no /dev/shm)"}
	}
	c.UserNS = detectNamespace("user_namespace", syscall.CLONE_NEWUSER, "available (used to hold the network namespace when the server is not root)")
	if !c.Root && !c.NetNS.Available && c.UserNS.Available {
		c.NetNS = Mechanism{Name: "net_namespace", Available: true,
			Detail: "through a user namespace (unprivileged server): no-network runs reach nothing, loopback is down too"}
	}
	c.Cgroup, c.CgroupMode = detectCgroup()
	c.Seccomp = detectSeccomp()
	return c
}

func detectNNP() Mechanism {
	m := Mechanism{Name: "no_new_privs"}
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		m.Detail = fmt.Sprintf("prctl(PR_GET_NO_NEW_PRIVS): %v", err)
		return m
	}
	m.Available = true
	m.Detail = "set on every confined run (setuid binaries cannot raise privileges)"
	if v == 1 {
		m.Detail += "; already set on the server"
	}
	return m
}

func detectLandlock() (fs, tcp, scope Mechanism, abi int) {
	fs = Mechanism{Name: "landlock"}
	tcp = Mechanism{Name: "landlock_tcp"}
	scope = Mechanism{Name: "landlock_scope"}
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		why := fmt.Sprintf("not available: %v", err)
		if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP) {
			why = "not available: kernel without Landlock or not enabled at boot (lsm=...,landlock)"
		}
		fs.Detail, tcp.Detail, scope.Detail = why, why, why
		return fs, tcp, scope, 0
	}
	abi = v
	fs.Available = true
	fs.Detail = fmt.Sprintf("ABI %d: filesystem rules (writes only to workspace and tmp; strict limits reads)", v)
	if v >= 4 {
		tcp.Available = true
		tcp.Detail = "TCP connect/bind denied under strict (UDP/raw need the network namespace)"
	} else {
		tcp.Detail = fmt.Sprintf("needs Landlock ABI >= 4, kernel has %d", v)
	}
	if v >= 6 {
		scope.Available = true
		scope.Detail = "runs cannot signal or connect (abstract unix) to processes outside their own sandbox"
	} else {
		scope.Detail = fmt.Sprintf("needs Landlock ABI >= 6, kernel has %d", v)
	}
	return fs, tcp, scope, abi
}

// detectNamespace starts /bin/true in a new namespace of the given kind.
func detectNamespace(name string, flag uintptr, detail string) Mechanism {
	m := Mechanism{Name: name}
	attr := &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: flag}}
	if flag == syscall.CLONE_NEWUSER {
		attr.Sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.Sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	bin := "/bin/true"
	if _, err := os.Stat(bin); err != nil {
		bin = "/usr/bin/true"
	}
	pid, err := syscall.ForkExec(bin, []string{"true"}, attr)
	if err != nil {
		m.Detail = fmt.Sprintf("cannot create: %v", err)
		if errors.Is(err, syscall.EPERM) {
			m.Detail += " (needs root/CAP_SYS_ADMIN, or unprivileged user namespaces)"
		}
		return m
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	m.Available = true
	m.Detail = detail
	return m
}

func detectSeccomp() Mechanism {
	m := Mechanism{Name: "seccomp"}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		m.Detail = fmt.Sprintf("kernel without seccomp: %v", err)
		return m
	}
	if _, err := seccompProgram(false, false); err != nil {
		m.Detail = err.Error()
		return m
	}
	m.Available = true
	m.Detail = "deny-list on confined runs: creating namespaces, bpf, io_uring, keyring, perf, modules, mounts, reboot; set-user-ID and set-group-ID modes (chmod, open, mkdir, mknod and their variants) and device nodes"
	return m
}

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Mechanism is one confinement mechanism and whether it works here.
type Mechanism struct {
	Name      string `json:"name" jsonschema:"Mechanism name."`
	Available bool   `json:"available" jsonschema:"True when the mechanism works on this kernel and is used."`
	// Detail says what the mechanism gives when available, or why not.
	Detail string `json:"detail" jsonschema:"What the mechanism gives when available, or why it is not."`
}

// Capabilities is what this kernel and process can enforce. It is computed
// once at startup (Detect) and shown by `pyexec doctor` and server_info; the
// launcher recomputes the cheap parts itself.
type Capabilities struct {
	UID         int       `json:"uid" jsonschema:"Effective uid of the server."`
	Root        bool      `json:"root" jsonschema:"True when the server runs as root."`
	NoNewPrivs  Mechanism `json:"no_new_privs" jsonschema:"prctl no_new_privs on every confined run."`
	Landlock    Mechanism `json:"landlock" jsonschema:"Landlock filesystem rules."`
	LandlockABI int       `json:"landlock_abi" jsonschema:"Landlock ABI version of the kernel (0: none)."`
	// LandlockTCP is Landlock's TCP bind/connect control (ABI >= 4).
	LandlockTCP Mechanism `json:"landlock_tcp" jsonschema:"Landlock TCP bind/connect rules (ABI 4+)."`
	// LandlockScope is signal/abstract-socket scoping (ABI >= 6): a run
	// cannot signal processes outside its own Landlock domain.
	LandlockScope Mechanism `json:"landlock_scope" jsonschema:"Landlock signal and abstract socket scoping (ABI 6+)."`
	NetNS         Mechanism `json:"net_namespace" jsonschema:"Empty network namespace for runs without network."`
	PidNS         Mechanism `json:"pid_namespace" jsonschema:"Own PID namespace and /proc for every confined run (root server); for strict runs otherwise."`
	UserNS        Mechanism `json:"user_namespace" jsonschema:"User namespaces."`
	MountNS       Mechanism `json:"mount_namespace" jsonschema:"Mount and IPC namespaces giving each confined run a private /dev/shm, nosuid mounts and IPC of its own."`
	Cgroup        Mechanism `json:"cgroup" jsonschema:"A cgroup per run: memory and process caps, peak memory, kill-all."`
	// CgroupMode is "v1" (memory+pids controllers), "v2" or "" (none).
	CgroupMode string    `json:"cgroup_mode" jsonschema:"v1, v2, or empty when no per-run cgroup can be made."`
	Seccomp    Mechanism `json:"seccomp" jsonschema:"Seccomp filters."`
	Rlimits    Mechanism `json:"rlimits" jsonschema:"Per-process resource limits."`
}

// List returns the mechanisms in display order.
func (c Capabilities) List() []Mechanism {
	return []Mechanism{c.NoNewPrivs, c.Rlimits, c.Landlock, c.LandlockTCP, c.LandlockScope,
		c.NetNS, c.PidNS, c.MountNS, c.UserNS, c.Cgroup, c.Seccomp}
}

// String renders the capabilities as a short text table for doctor output.
func (c Capabilities) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "running as uid %d (root: %v)\n", c.UID, c.Root)
	for _, m := range c.List() {
		mark := "yes"
		if !m.Available {
			mark = "NO "
		}
		fmt.Fprintf(&b, "  %-16s %s  %s\n", m.Name, mark, m.Detail)
	}
	return b.String()
}

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

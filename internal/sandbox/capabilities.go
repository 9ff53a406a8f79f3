package sandbox

import (
	"fmt"
	"strings"
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

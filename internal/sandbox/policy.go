// Package sandbox turns a confinement policy into kernel mechanisms: rlimits,
// no_new_privs, Landlock, a network namespace, a PID namespace, a mount
// namespace with a private /dev/shm, a seccomp deny-list, a per-run cgroup
// and an unprivileged run-as user (or root without capabilities).
//
// The server never confines itself. It builds a Spec (JSON, carried inside the
// launcher spec) and the re-executed launcher helper calls Prepare, then
// (*Run).Start to start Python confined, then (*Run).Finish after reaping.
// Everything that must happen "between fork and exec" is done on a dedicated,
// locked OS thread of the launcher whose per-thread state (credentials,
// Landlock domain, no_new_privs, network namespace, cgroup membership) the
// child inherits; the launcher process itself stays unconfined so it can
// still kill, measure and clean up the run.
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Policy names a confinement level. The order none < workspace < strict is
// the "tightness" order used when per-request settings are merged.
type Policy string

const (
	// PolicyNone applies no confinement (the python-executor-mcp seed's mode);
	// resource limits still apply unless disabled.
	PolicyNone Policy = "none"
	// PolicyWorkspace allows writes only in the workspace and the run's private
	// temp dir; the system stays readable; network allowed by default.
	PolicyWorkspace Policy = "workspace"
	// PolicyStrict is workspace plus: no network, reads limited to what Python
	// and its environment need plus the workspace, a private PID namespace.
	PolicyStrict Policy = "strict"
)

// DefaultPolicy is the policy of a server started without --sandbox.
const DefaultPolicy = PolicyWorkspace

func (p Policy) rank() int {
	switch p {
	case PolicyNone:
		return 0
	case PolicyWorkspace:
		return 1
	case PolicyStrict:
		return 2
	}
	return -1
}

// ParsePolicy validates a policy name ("" means the default).
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return DefaultPolicy, nil
	}
	p := Policy(strings.ToLower(strings.TrimSpace(s)))
	if p.rank() < 0 {
		return "", fmt.Errorf("sandbox: unknown policy %q (want none, workspace or strict)", s)
	}
	return p, nil
}

// Network says whether a run may use the network. The empty value means
// "what the policy implies": deny for strict, allow otherwise.
type Network string

const (
	NetworkDefault Network = ""
	NetworkAllow   Network = "allow"
	NetworkDeny    Network = "deny"
)

// ParseNetwork validates a network setting ("" means: implied by the policy).
func ParseNetwork(s string) (Network, error) {
	n := Network(strings.ToLower(strings.TrimSpace(s)))
	switch n {
	case NetworkDefault, NetworkAllow, NetworkDeny:
		return n, nil
	}
	return "", fmt.Errorf("sandbox: unknown network setting %q (want allow or deny)", s)
}

// Limits are resource caps. For each field 0 means "not set" (inherit the
// server's value or the default) and a negative value means "unlimited"
// (only meaningful in server settings: a request cannot loosen).
type Limits struct {
	MemoryBytes   int64 `json:"memory_bytes,omitempty" jsonschema:"Memory cap in bytes for the whole run (all its processes). Default 2 GiB."`
	CPUSeconds    int64 `json:"cpu_seconds,omitempty" jsonschema:"CPU time cap in seconds per process (RLIMIT_CPU). Default: unlimited (the run timeout bounds wall time)."`
	MaxProcs      int64 `json:"max_procs,omitempty" jsonschema:"Maximum number of processes and threads of the run. Default 256."`
	FileSizeBytes int64 `json:"file_size_bytes,omitempty" jsonschema:"Largest file the run may write, in bytes (RLIMIT_FSIZE). Default 1 GiB."`
	OpenFiles     int64 `json:"open_files,omitempty" jsonschema:"Maximum number of open file descriptors per process (RLIMIT_NOFILE). Default 1024."`
}

// DefaultLimits are the limits of a server started without limit flags.
func DefaultLimits() Limits {
	return Limits{
		MemoryBytes:   2 << 30,
		CPUSeconds:    -1,
		MaxProcs:      256,
		FileSizeBytes: 1 << 30,
		OpenFiles:     1024,
	}
}

// tighten returns the tighter of a server value and a request value.
// It fails when the request asks for more than the server allows.
func tighten(name string, server, req int64) (int64, error) {
	switch {
	case req == 0:
		return server, nil
	case req < 0:
		if server < 0 || server == 0 {
			return server, nil
		}
		return 0, fmt.Errorf("sandbox: limits.%s: a request cannot lift the server's limit (%d)", name, server)
	case server > 0 && req > server:
		return 0, fmt.Errorf("sandbox: limits.%s: %d exceeds the server's limit %d; requests may only tighten", name, req, server)
	}
	return req, nil
}

// Tighten merges per-request limits into server limits: a request may lower
// any limit and never raise it.
func (l Limits) Tighten(req Limits) (Limits, error) {
	var out Limits
	var err error
	var errs []error
	if out.MemoryBytes, err = tighten("memory_bytes", l.MemoryBytes, req.MemoryBytes); err != nil {
		errs = append(errs, err)
	}
	if out.CPUSeconds, err = tighten("cpu_seconds", l.CPUSeconds, req.CPUSeconds); err != nil {
		errs = append(errs, err)
	}
	if out.MaxProcs, err = tighten("max_procs", l.MaxProcs, req.MaxProcs); err != nil {
		errs = append(errs, err)
	}
	if out.FileSizeBytes, err = tighten("file_size_bytes", l.FileSizeBytes, req.FileSizeBytes); err != nil {
		errs = append(errs, err)
	}
	if out.OpenFiles, err = tighten("open_files", l.OpenFiles, req.OpenFiles); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// WithDefaults fills unset (zero) fields from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.CPUSeconds == 0 {
		l.CPUSeconds = d.CPUSeconds
	}
	if l.MaxProcs == 0 {
		l.MaxProcs = d.MaxProcs
	}
	if l.FileSizeBytes == 0 {
		l.FileSizeBytes = d.FileSizeBytes
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = d.OpenFiles
	}
	return l
}

// Settings are the operator- and request-tunable parts of a Spec. The server
// holds one Settings from its flags; a request may carry another which is
// merged with Settings.Tighten.
type Settings struct {
	Policy  Policy  `json:"policy,omitempty" jsonschema:"Sandbox policy: none, workspace or strict. A request may only tighten the server's policy."`
	Network Network `json:"network,omitempty" jsonschema:"Network access: allow or deny. Default: deny under strict, allow otherwise. A request may only tighten."`
	Limits  Limits  `json:"limits,omitempty" jsonschema:"Resource limits; a request may only lower them."`
	// BestEffort downgrades a policy the kernel cannot fully enforce instead
	// of failing the run; what was skipped is reported in every Report.
	BestEffort bool `json:"best_effort,omitempty" jsonschema:"Server-side only: run with whatever mechanisms work instead of failing closed."`
}

// EffectiveNetwork resolves NetworkDefault against the policy.
func (s Settings) EffectiveNetwork() Network {
	if s.Network != NetworkDefault {
		return s.Network
	}
	if s.Policy == PolicyStrict {
		return NetworkDeny
	}
	return NetworkAllow
}

// Tighten merges per-request settings into the server's. The policy and the
// network may only get stricter, limits only lower; anything else is an error
// naming the field, so a client learns what to change. BestEffort is never
// taken from a request.
func (s Settings) Tighten(req Settings) (Settings, error) {
	out := s
	var errs []error
	if s.Policy == "" {
		out.Policy = DefaultPolicy
	}
	if req.Policy != "" {
		if req.Policy.rank() < 0 {
			errs = append(errs, fmt.Errorf("sandbox: unknown policy %q (want none, workspace or strict)", req.Policy))
		} else if req.Policy.rank() < out.Policy.rank() {
			errs = append(errs, fmt.Errorf("sandbox: policy %q is looser than the server's %q; requests may only tighten", req.Policy, out.Policy))
		} else {
			out.Policy = req.Policy
		}
	}
	srvNet := out.EffectiveNetwork()
	if req.Network != NetworkDefault {
		if _, err := ParseNetwork(string(req.Network)); err != nil {
			errs = append(errs, err)
		} else if req.Network == NetworkAllow && srvNet == NetworkDeny {
			errs = append(errs, errors.New("sandbox: network allow requested but the server denies network; requests may only tighten"))
		} else {
			out.Network = req.Network
		}
	} else if req.Policy != "" && req.Policy.rank() >= 0 {
		// A request naming a policy gets that policy's network default
		// (strict: deny), clamped below by the server's setting.
		out.Network = NetworkDefault
	}
	if out.EffectiveNetwork() == NetworkAllow && srvNet == NetworkDeny {
		out.Network = NetworkDeny
	}
	lim, err := s.Limits.Tighten(req.Limits)
	if err != nil {
		errs = append(errs, err)
	}
	out.Limits = lim
	if err := errors.Join(errs...); err != nil {
		return Settings{}, err
	}
	return out, nil
}

// Credential is the unprivileged identity a run executes as.
type Credential struct {
	Name string `json:"name,omitempty"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
}

// Spec is everything the launcher needs to confine one run. It is built by
// the server (engine) and travels as JSON inside the launcher spec.
type Spec struct {
	Settings
	// RunID names the run's cgroup; unique per run, [A-Za-z0-9_-].
	RunID string `json:"run_id"`
	// Workspace is the writable tree (the run's cwd subtree / the workspace).
	Workspace string `json:"workspace,omitempty"`
	// WorkspaceReadOnly makes the workspace readable only (helpers the
	// server runs for a request: readonly.go).
	WorkspaceReadOnly bool `json:"workspace_read_only,omitempty"`
	// TmpDir is the run's private temp dir (TMPDIR); writable, and chowned to
	// RunAs by Prepare.
	TmpDir string `json:"tmp_dir,omitempty"`
	// ReadOnly lists what the run must read and execute besides the system:
	// the interpreter prefix, environment dirs, the code file's directory.
	// Under strict these (plus the workspace and a small system set) are the
	// only readable paths.
	ReadOnly []string `json:"read_only,omitempty"`
	// Hidden lists trees a workspace-policy run may not read even though
	// the rest of the system is readable (the engine's state dir: other
	// runs' code, temp dirs, logs). /tmp is always hidden. Paths granted
	// explicitly (workspace, tmp dir, read-only paths) stay accessible.
	Hidden []string `json:"hidden,omitempty"`
	// ReadWrite lists extra writable paths (operator-configured).
	ReadWrite []string `json:"read_write,omitempty"`
	// RunAs, when set, is the identity Python runs as (the launcher is root).
	// When what the run needs cannot be made reachable for it, the run
	// fails; it never falls back to root.
	RunAs *Credential `json:"run_as,omitempty"`
	// NoPrivateProc, when set, says why the server found that runs cannot
	// get a /proc of their own here (a kernel whose procfs lacks pidns=):
	// the policy then cannot be enforced (runs fail closed unless
	// BestEffort, which runs them in the launcher's PID namespace).
	NoPrivateProc string `json:"no_private_proc,omitempty"`
	// ForkServer says the spec confines a warm interpreter: with a root
	// launcher its supervisors get their own view of its namespaces
	// (SupervisorDir).
	ForkServer bool `json:"fork_server,omitempty"`
}

// Validate checks that a Spec is self-consistent before anything is applied.
func (s *Spec) Validate() error {
	if s.Policy == "" {
		s.Policy = DefaultPolicy
	}
	if s.Policy.rank() < 0 {
		return fmt.Errorf("sandbox: unknown policy %q", s.Policy)
	}
	if _, err := ParseNetwork(string(s.Network)); err != nil {
		return err
	}
	if s.RunID == "" {
		return errors.New("sandbox: spec.run_id is empty")
	}
	for _, r := range s.RunID {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("sandbox: spec.run_id %q has characters outside [A-Za-z0-9_-]", s.RunID)
		}
	}
	if s.Limits.OpenFiles > 0 && s.Limits.OpenFiles < 16 {
		// Applied to the launcher too (rlimits are per process); Python
		// itself cannot start with fewer.
		return fmt.Errorf("sandbox: limits.open_files %d is below the minimum of 16", s.Limits.OpenFiles)
	}
	if s.Policy != PolicyNone && s.Workspace == "" {
		return fmt.Errorf("sandbox: policy %s needs spec.workspace", s.Policy)
	}
	return nil
}

// Marshal and UnmarshalSpec exist so callers do not depend on the encoding.
func (s Spec) Marshal() ([]byte, error) { return json.Marshal(s) }

// UnmarshalSpec decodes a Spec produced by Marshal.
func UnmarshalSpec(b []byte) (Spec, error) {
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return Spec{}, fmt.Errorf("sandbox: decode spec: %w", err)
	}
	return s, nil
}

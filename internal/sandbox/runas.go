package sandbox

// Run-as modes (see user_linux.go for what each means on Linux; off Linux
// runs always keep the server's user).
const (
	RunAsAuto = "auto"
	RunAsNone = "none"
)

// DefaultRunAsUser is the unprivileged account auto mode uses.
const DefaultRunAsUser = "nobody"

// Access bits for CheckAccess.
const (
	AccessRead  = 4
	AccessWrite = 2
	AccessExec  = 1
)

// RunAsChoice is the identity decision for a server configuration.
type RunAsChoice struct {
	// Cred is nil when runs keep the server's uid.
	Cred *Credential `json:"cred,omitempty"`
	// Notes explain downgrades and consequences (shown in results/doctor).
	Notes []string `json:"notes,omitempty"`
	// Hidden lists the ancestors of needed paths Cred cannot search (e.g.
	// /root): each run covers them with a tmpfs in its private mount
	// namespace and binds back only what it needs (see reach.go), so the
	// rest of them is invisible to runs.
	Hidden []string `json:"hidden,omitempty"`
	// IdmappedWorkspace: the workspace belongs to the server's uid and runs
	// write it through an idmapped mount as its owner (see idmap.go).
	IdmappedWorkspace bool `json:"idmapped_workspace,omitempty"`
}

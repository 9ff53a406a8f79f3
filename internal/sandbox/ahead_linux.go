package sandbox

import (
	"os"

	"golang.org/x/sys/unix"
)

// Ahead is confinement work a launcher does before it knows its run: a
// launcher started ahead (launcher.Pool) is told which run-as user the
// server expects, and makes the workspace idmapping's user namespace for
// it while it waits. That namespace takes a short-lived process (a fork of
// the launcher), which on a loaded machine was the longest wait of a cold
// run's confinement.
//
// Nothing made ahead depends on the run beyond the uid/gid pair: the user
// namespace holds no process once made, only the mapping server uid ->
// run uid, and it is used for one run's idmapped mount (PrepareAhead) or
// closed. Everything else (cgroup, namespaces, Landlock, seccomp) is made
// for the run's spec after it arrives, as without Ahead.
type Ahead struct {
	cred Credential
	ch   chan idmapResult
}

// StartAhead begins the work for runs as cred (nil, or a server that is
// not root: nothing to do ahead).
func StartAhead(cred *Credential) *Ahead {
	if cred == nil || cred.UID == 0 || os.Geteuid() != 0 {
		return nil
	}
	ch := make(chan idmapResult, 1)
	a := &Ahead{cred: *cred, ch: ch}
	go func(cred Credential) {
		fd, err := usernsFD(&cred)
		ch <- idmapResult{fd, err}
	}(*cred)
	return a
}

// idmapFor hands over the user namespace made ahead when it maps to
// cred, or nil. Either way a is used up.
func (a *Ahead) idmapFor(cred *Credential) chan idmapResult {
	if a == nil || a.ch == nil {
		return nil
	}
	ch := a.ch
	a.ch = nil
	if cred != nil && cred.UID == a.cred.UID && cred.GID == a.cred.GID {
		return ch
	}
	// Another identity: wait for the fork to be reaped before the run's
	// own processes exist, and drop the namespace.
	if res := <-ch; res.err == nil {
		unix.Close(res.fd)
	}
	return nil
}

// Close releases what was made ahead and not used. Safe on nil.
func (a *Ahead) Close() { a.idmapFor(nil) }

// PrepareAhead is Prepare, using what a made ahead where it fits the spec.
// a is used up.
func PrepareAhead(spec Spec, a *Ahead) (*Run, error) {
	defer a.Close()
	return prepare(spec, a)
}

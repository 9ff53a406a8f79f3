package workspace

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Access bits, as in a permission triplet.
const (
	AccessRead  = 4
	AccessWrite = 2
	AccessExec  = 1
)

// Identity is the on-disk identity runs have in the workspace, whose rights
// every access is held to. The zero value (Checked false) means accesses
// keep the server's own rights: the server is not root, or runs have the
// server's full rights anyway (sandbox none).
type Identity struct {
	Checked bool
	UID     uint32
	GID     uint32
}

// allows tells whether the identity may access a file with st's owner and
// mode (plain permission bits, primary group: what the sandbox checks too).
func (id Identity) allows(st *unix.Stat_t, want uint32) error {
	if !id.Checked {
		return nil
	}
	perm := st.Mode & 0o7
	switch {
	case st.Uid == id.UID:
		perm = (st.Mode >> 6) & 0o7
	case st.Gid == id.GID:
		perm = (st.Mode >> 3) & 0o7
	}
	if perm&want != want {
		return fmt.Errorf("is not %s for runs (mode %04o, owner %d:%d; runs are uid %d)", accessName(want), st.Mode&0o7777, st.Uid, st.Gid, id.UID)
	}
	return nil
}

func (id Identity) allowsFD(fd int, want uint32) error {
	if !id.Checked {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("cannot be examined: %v", err)
	}
	return id.allows(&st, want)
}

func accessName(w uint32) string {
	switch w {
	case AccessRead:
		return "readable"
	case AccessWrite:
		return "writable"
	case AccessExec:
		return "searchable"
	case AccessWrite | AccessExec:
		return "writable and searchable"
	}
	return "accessible"
}

package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// A read-only workspace is for helpers the server runs confined on a
// request's behalf that must read the workspace as the run would, but
// not write it (a uv build of a local requirement): it is reached (bound,
// idmapped) exactly as a run's workspace, and then granted read-only, by
// Landlock and by the mount itself.

// writableWorkspace is the workspace when it is writable, else "".
func (s *Spec) writableWorkspace() string {
	if s.WorkspaceReadOnly {
		return ""
	}
	return s.Workspace
}

// readOnlyPaths is ReadOnly plus a read-only workspace.
func (s *Spec) readOnlyPaths() []string {
	if !s.WorkspaceReadOnly || s.Workspace == "" {
		return s.ReadOnly
	}
	return append(append([]string(nil), s.ReadOnly...), s.Workspace)
}

// remountReadOnly makes the mount at dir (the idmapped workspace, in the
// calling thread's private mount namespace) read-only, recursively.
func remountReadOnly(dir string) error {
	if err := unix.MountSetattr(unix.AT_FDCWD, dir, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("make the workspace read-only: %w", err)
	}
	return nil
}

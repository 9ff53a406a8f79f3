package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The workspace is what runs may write, so a server started from the wrong
// directory (an MCP client config without --workspace launches it in /, or
// in the user's home) would give every run the system or everything the
// user owns. CheckWorkspaceRoot refuses such a workspace.

// systemTrees are directories no workspace may be in.
var systemTrees = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr"}

// systemDirs are directories no workspace may be (their subdirectories
// may: /home/me/project, /var/lib/app, /opt/app). A temp dir (/tmp,
// /var/tmp) may be one: the python-executor-mcp seed's examples run in
// /tmp, and it is what everyone may write anyway.
var systemDirs = []string{"/", "/home", "/root", "/var", "/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/mail", "/opt", "/srv", "/mnt", "/media", "/snap"}

// CheckWorkspaceRoot returns an error saying why dir (absolute, symlinks
// resolved) cannot be a workspace: the root, a system directory, or the
// whole home directory of the server's user.
func CheckWorkspaceRoot(dir string) error {
	dir = filepath.Clean(dir)
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		if real, err := filepath.EvalSymlinks(home); err == nil {
			home = real
		}
		if dir == filepath.Clean(home) {
			return fmt.Errorf("workspace %s is the whole home directory of the server's user: runs could write its keys, tokens and every project in it", dir)
		}
	}
	for _, t := range systemTrees {
		if dir == t || strings.HasPrefix(dir, t+"/") {
			return fmt.Errorf("workspace %s is inside the system directory %s: runs could write the system", dir, t)
		}
	}
	for _, d := range systemDirs {
		if dir == d {
			what := "a system directory"
			if d == "/" {
				what = "the whole file system"
			}
			return fmt.Errorf("workspace %s is %s: runs could write everything in it", dir, what)
		}
	}
	return nil
}

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckWorkspaceRoot(t *testing.T) {
	home, _ := os.UserHomeDir()
	for _, tc := range []struct {
		dir  string
		want string // "" when accepted
	}{
		{"/", "the whole file system"},
		{"/usr", "system directory /usr"},
		{"/usr/local/src/x", "system directory /usr"},
		{"/etc", "system directory /etc"},
		{"/proc/self", "system directory /proc"},
		{"/var", "a system directory"},
		{"/var/lib", "a system directory"},
		{"/tmp", ""},
		{"/home", "a system directory"},
		{home, "whole home directory"},
		{filepath.Join(home, "project"), ""},
		{"/var/tmp/pyexec-x/ws", ""},
		{"/tmp/TestX/001", ""},
		{"/srv/app", ""},
		{"/opt/app", ""},
	} {
		err := CheckWorkspaceRoot(tc.dir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error about %q", tc.dir, err, tc.want)
		}
	}
}

//go:build linux

package engine

import "testing"

// Index arguments with credentials keep the pip shim out of a session's
// environment.
func TestHasUserinfo(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want bool
	}{
		{"--index-url", false},
		{"https://pkgs.example/simple", false},
		{"https://user:secret@pkgs.example/simple", true},
		{"https://token@pkgs.example/simple", true},
		{"/srv/wheels", false},
	} {
		if got := hasUserinfo(c.arg); got != c.want {
			t.Errorf("hasUserinfo(%q) = %v, want %v", c.arg, got, c.want)
		}
	}
}

package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestUnenforceableOffLinux(t *testing.T) {
	tests := []struct {
		name     string
		settings Settings
		want     []string // nil: enforceable (nothing asked)
	}{
		{"none", Settings{Policy: PolicyNone}, nil},
		{"default workspace", Settings{Policy: PolicyWorkspace}, []string{`sandbox policy "workspace"`, "cannot be enforced on darwin", "--sandbox none", "container image"}},
		{"strict denies the network too", Settings{Policy: PolicyStrict}, []string{`sandbox policy "strict"`, "and network deny"}},
		{"none with network deny", Settings{Policy: PolicyNone, Network: NetworkDeny}, []string{"network deny (a network namespace) cannot be enforced"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := unenforceable(Spec{Settings: tt.settings}, "darwin")
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrUnconfinable) {
				t.Fatalf("got %v, want ErrUnconfinable", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

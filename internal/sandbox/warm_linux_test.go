package sandbox

import "testing"

func TestCovers(t *testing.T) {
	nobody := &Credential{UID: 65534, GID: 65534}
	zygote := Spec{
		Settings:  Settings{Policy: PolicyWorkspace},
		Workspace: "/ws", TmpDir: "/state/warm/tmp-1",
		ReadOnly:  []string{"/py", "/state/code", "/state/jobs/helper"},
		ReadWrite: []string{"/state/tmp"},
		Hidden:    []string{"/ws/.state", "/state"},
		RunAs:     nobody,
	}
	run := func(edit func(*Spec)) *Spec {
		s := Spec{
			Settings:  Settings{Policy: PolicyWorkspace},
			Workspace: "/ws", TmpDir: "/state/tmp/run-1",
			ReadOnly: []string{"/py", "/state/code/abc.py"},
			Hidden:   []string{"/ws/.state", "/state"},
			RunAs:    &Credential{UID: 65534, GID: 65534},
		}
		if edit != nil {
			edit(&s)
		}
		return &s
	}
	cases := []struct {
		name string
		run  *Spec
		want bool
	}{
		{"same", run(nil), true},
		{"workspace script", run(func(s *Spec) { s.ReadOnly = []string{"/py", "/ws/sub/x.py"} }), true},
		{"helper dir", run(func(s *Spec) { s.ReadOnly = append(s.ReadOnly, "/state/jobs/helper") }), true},
		{"other interpreter", run(func(s *Spec) { s.ReadOnly = []string{"/py2", "/state/code/abc.py"} }), false},
		{"hidden tree inside the workspace", run(func(s *Spec) { s.ReadOnly = append(s.ReadOnly, "/ws/.state/x") }), false},
		{"tmp dir elsewhere", run(func(s *Spec) { s.TmpDir = "/elsewhere/run-1" }), false},
		{"other policy", run(func(s *Spec) { s.Policy = PolicyStrict }), false},
		{"network deny", run(func(s *Spec) { s.Network = NetworkDeny }), false},
		{"other limits", run(func(s *Spec) { s.Limits.MemoryBytes = 1 << 20 }), false},
		{"cpu limit is per run", run(func(s *Spec) { s.Limits.CPUSeconds = 5 }), true},
		{"root", run(func(s *Spec) { s.RunAs = nil }), false},
		{"other workspace", run(func(s *Spec) { s.Workspace = "/ws2" }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := Covers(&zygote, tc.run); got != tc.want {
				t.Errorf("Covers = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

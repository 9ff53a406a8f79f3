package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-11-25T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	tests := []struct {
		name                  string
		bi                    *debug.BuildInfo
		version, commit, date string
		wantVersion           string
		wantCommit            string
		wantInString          string
	}{
		{"stamped release wins over the toolchain", vcs, "v1.2.3", "feedfacecafe", "2026-12-01", "1.2.3", "feedfacecafe", "commit feedfacecafe-dirty, 2026-12-01"},
		{"checkout build names its commit", vcs, "", "", "", fallbackVersion, "0123456789abcdef0123", "commit 0123456789ab-dirty, 2026-11-25T10:00:00Z"},
		{"go install of a tagged version", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, "", "", "", "0.3.0", "", "commit unknown"},
		{"no build info at all", nil, "", "", "", fallbackVersion, "", "commit unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := fromBuildInfo(tt.bi, tt.version, tt.commit, tt.date)
			if in.Version != tt.wantVersion || in.Commit != tt.wantCommit {
				t.Fatalf("got version %q commit %q, want %q %q", in.Version, in.Commit, tt.wantVersion, tt.wantCommit)
			}
			if s := in.String(); !strings.Contains(s, tt.wantInString) || !strings.HasPrefix(s, "pyexec "+tt.wantVersion+" (") {
				t.Fatalf("String() = %q, want it to contain %q", s, tt.wantInString)
			}
		})
	}
}

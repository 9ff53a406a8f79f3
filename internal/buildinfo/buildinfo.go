// Package buildinfo says which build of pyexec is running: the release
// version and the commit it was built from. Release builds stamp both with
// -ldflags -X (see .goreleaser.yaml and the Makefile); any other build (go
// build in a checkout, go install) falls back to what the Go toolchain
// recorded in the binary (debug.ReadBuildInfo), so even an unstamped binary
// names its commit.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time: -X github.com/pyexec/pyexec/internal/buildinfo.version=v1.2.3
// (and .commit, .date). Empty means "not stamped".
var (
	version string
	commit  string
	date    string
)

// fallbackVersion is reported when neither the linker nor the Go toolchain
// recorded a version (a build outside any module version or VCS checkout).
const fallbackVersion = "0.1.0-dev"

// Info describes this binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Date      string `json:"date,omitempty"`
	Modified  bool   `json:"modified,omitempty"` // built from a checkout with uncommitted changes
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// Read returns the stamped values, completed from the toolchain's record.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, version, commit, date)
}

func fromBuildInfo(bi *debug.BuildInfo, version, commit, date string) Info {
	in := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			// go install MODULE@vX.Y.Z, or a VCS pseudo-version of a checkout.
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Commit == "" {
					in.Commit = s.Value
				}
			case "vcs.time":
				if in.Date == "" {
					in.Date = s.Value
				}
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if in.Version == "" {
		in.Version = fallbackVersion
	}
	in.Version = strings.TrimPrefix(in.Version, "v")
	return in
}

// String is the one line `pyexec version` prints, e.g.
// "pyexec 0.2.0 (commit 474a493c1f2e, 2026-11-25T10:00:00Z) go1.26.8 linux/amd64".
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pyexec %s", in.Version)
	var extra []string
	if in.Commit != "" {
		c := in.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if in.Modified {
			c += "-dirty"
		}
		extra = append(extra, "commit "+c)
	} else {
		extra = append(extra, "commit unknown")
	}
	if in.Date != "" {
		extra = append(extra, in.Date)
	}
	fmt.Fprintf(&b, " (%s) %s %s", strings.Join(extra, ", "), in.GoVersion, in.Platform)
	return b.String()
}

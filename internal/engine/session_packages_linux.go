//go:build linux

package engine

// Packages mid-session. A session's interpreter has an overlay directory on
// sys.path (and PYTHONPATH, for the processes its cells start): overlayDir
// in its own temp dir, which it alone can see. Installing into a live
// session writes there and nowhere else; the environment the session
// started in (a cached, shared, read-only one) is never written.
//
// Two ways in, both confined as the run user:
//   - dependencies on a later call (SessionProcess.Install): the server runs
//     `uv pip install --target OVERLAY` through the same confinement as the
//     builds that execute package code (runConfined: the request's sandbox
//     settings and network, the unprivileged run user, writing only the
//     session's temp dir and a private uv cache);
//   - `pip install` inside a cell: the driver puts a pip shim first on PATH
//     that runs uv from inside the session's own sandbox (its network, its
//     limits, its user) into the same overlay.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// overlayDir is the overlay's name in the session's temp dir.
const overlayDir = ".pyexec-site"

// sessionEnv names the overlay and what the pip shim needs: uv, the
// server's index arguments, whether the network is denied.
func (e *Engine) sessionEnv(req *Request) func(tmpDir string) []string {
	deny := false
	if s, err := e.sandboxSettings(req); err == nil {
		deny = s.EffectiveNetwork() == sandbox.NetworkDeny
	}
	return func(tmpDir string) []string {
		env := []string{"PYEXEC_SESSION_OVERLAY=" + filepath.Join(tmpDir, overlayDir)}
		args := e.envs.IndexArgs()
		switch uv, err := e.envs.UVPath(); {
		case err != nil || uv == "":
			env = append(env, "PYEXEC_PIP_OFF=uv is not available on the server")
		case slices.ContainsFunc(args, hasUserinfo):
			// Index credentials never reach a session's environment.
			env = append(env, "PYEXEC_PIP_OFF=the server's package index needs credentials, which sessions do not get; pass dependencies to run_python instead")
		default:
			env = append(env, "PYEXEC_UV="+uv, "PYEXEC_UV_ARGS="+strings.Join(args, "\n"))
		}
		if deny {
			env = append(env, "PYEXEC_NETWORK=deny")
		}
		return env
	}
}

// sessionReadable is what a session reads beyond a run, for its pip shim:
// uv and the operator's local wheel directories.
func (e *Engine) sessionReadable() []string {
	var out []string
	if uv, err := e.envs.UVPath(); err == nil && uv != "" {
		out = append(out, uv)
	}
	for _, f := range e.cfg.Deps.Index.FindLinks { // the operator's local wheels
		if path, ok := strings.CutPrefix(f, "file://"); ok {
			out = append(out, path)
		} else if !strings.Contains(f, "://") {
			out = append(out, f)
		}
	}
	return out
}

// ErrNetworkDenied marks an install that failed in a session whose network
// is denied.
var ErrNetworkDenied = errors.New("the session's network is denied (network: deny)")

// Install installs requirements into the session's overlay with uv,
// confined as the run user; the next cell imports them with no restart.
// It returns uv's report.
func (sp *SessionProcess) Install(ctx context.Context, requirements []string) (string, error) {
	select {
	case <-sp.prepOnce:
	case <-sp.done:
		return "", ErrSessionEnded
	}
	p := sp.prep
	settings, err := sp.e.sandboxSettings(&sp.req)
	if err != nil {
		return "", err
	}
	report, err := sp.e.envs.InstallTarget(ctx, uvenv.TargetInstall{
		Python: p.interp.Path, Target: filepath.Join(p.tmpDir, overlayDir), Writable: []string{p.tmpDir},
		Requirements: requirements, Confine: sp.e.buildConfiner(&sp.req)})
	if err != nil && settings.EffectiveNetwork() == sandbox.NetworkDeny {
		return "", fmt.Errorf("%w: packages can come only from the server's local wheel directories, so this install failed: %v", ErrNetworkDenied, err)
	}
	return report, err
}

// hasUserinfo reports whether an index argument is a URL with credentials.
func hasUserinfo(arg string) bool {
	u, err := url.Parse(arg)
	return err == nil && u.User != nil
}

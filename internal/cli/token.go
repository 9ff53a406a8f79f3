package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/pyexec/pyexec/internal/httpapi"
)

// tokenEnv carries a token by value. It is read once and removed from the
// process environment, so nothing this process starts (launchers, runs with
// --inherit-env) inherits it.
const tokenEnv = "PYEXEC_TOKEN"

// refusedTokenFlag reports (and explains) a --token on the command line.
// Why refuse rather than accept with a warning: every local user, and every
// run, can read /proc/PID/cmdline, so a token there is public; pyexec is
// young enough that the flag can go instead of living on as a trap.
func refusedTokenFlag(cmd string, args []string, stderr io.Writer) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "token" {
			fmt.Fprintf(stderr, "pyexec %s: --token is not accepted: a token on the command line is visible to every local user in /proc/PID/cmdline.\n"+
				"Put it in a file only you can read and pass --token-file FILE (or PYEXEC_TOKEN_FILE), or set %s.\n", cmd, tokenEnv)
			return true
		}
	}
	return false
}

// takeEnvToken returns PYEXEC_TOKEN's value and removes it from the
// environment.
func takeEnvToken() string {
	v, ok := os.LookupEnv(tokenEnv)
	if !ok {
		return ""
	}
	os.Unsetenv(tokenEnv)
	return strings.TrimSpace(v)
}

// serveAuth decides the execution server's token: --token-file, else
// PYEXEC_TOKEN, else none with --insecure-no-auth, else the token generated
// into the state dir (created on first use). source says where it came
// from, for the startup lines.
func serveAuth(tokenFile string, noAuth bool, stateDir, workspace string, logger *slog.Logger) (token, source string, err error) {
	envToken := takeEnvToken()
	switch {
	case noAuth && (tokenFile != "" || envToken != ""):
		return "", "", errors.New("--insecure-no-auth and a token (--token-file or PYEXEC_TOKEN) contradict each other; give one")
	case noAuth:
		return "", "", nil
	case tokenFile != "":
		token, mode, err := httpapi.ReadTokenFile(tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("--token-file: %w", err)
		}
		warnWeak(token, tokenFile, mode, logger)
		return token, "token file " + tokenFile, nil
	case envToken != "":
		if err := httpapi.CheckToken(envToken); err != nil {
			return "", "", fmt.Errorf("%s: %w", tokenEnv, err)
		}
		warnWeak(envToken, "", 0, logger)
		return envToken, tokenEnv, nil
	}
	path := httpapi.TokenFile(stateDir)
	if inside(workspace, path) {
		return "", "", fmt.Errorf("the token file would be %s, inside the workspace %s, where runs can read it: use a --state-dir outside the workspace, or give --token-file FILE outside it", path, workspace)
	}
	token, path, created, err := httpapi.LoadOrCreateToken(stateDir)
	if err != nil {
		return "", "", err
	}
	if created {
		return token, "generated into " + path, nil
	}
	return token, "token file " + path, nil
}

func warnWeak(token, file string, mode fs.FileMode, logger *slog.Logger) {
	if len(token) < httpapi.WeakTokenLength {
		logger.Warn("the bearer token is short and guessable; a generated one has 64 hex characters", "length", len(token))
	}
	if file != "" && mode.Perm()&0o077 != 0 {
		logger.Warn("the token file can be read by other users; chmod 600 it", "file", file, "mode", fmt.Sprintf("%04o", mode.Perm()))
	}
}

// clientToken finds the token for the execution server at serverURL:
// --token-file, else PYEXEC_TOKEN, else (for a server on this machine) the
// token file a `pyexec serve` with the same state dir generated. A token
// from the state dir is never sent to another machine.
func clientToken(serverURL, tokenFile, stateDir string) (token, source string, err error) {
	envToken := takeEnvToken()
	switch {
	case tokenFile != "":
		token, _, err := httpapi.ReadTokenFile(tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("--token-file: %w", err)
		}
		return token, "token file " + tokenFile, nil
	case envToken != "":
		return envToken, tokenEnv, nil
	}
	u, err := url.Parse(serverURL)
	if err != nil || !loopbackHost(u.Hostname()) {
		return "", "", nil
	}
	path := httpapi.TokenFile(stateDir)
	token, _, err = httpapi.ReadTokenFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	return token, "token file " + path, nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// inside reports whether path is root or under it (both cleaned, symlinks
// of existing parents resolved).
func inside(root, path string) bool {
	if root == "" {
		return false
	}
	resolve := func(p string) string {
		p, _ = filepath.Abs(p)
		dir, base := filepath.Split(p)
		if d, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(d, base)
		}
		return p
	}
	r, p := resolve(root), resolve(path)
	rel, err := filepath.Rel(r, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

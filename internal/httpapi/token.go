package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The execution server never answers without credentials by default: when
// no token is given, `pyexec serve` generates one, as Jupyter does, and
// keeps it in the state dir (TokenFile), readable by its own user only.
// Runs cannot read it: the state dir is hidden from them by the sandbox
// (see engine's hidden trees), the file is 0600 and owned by the server's
// user, and runs execute as another user. `pyexec mcp --executor URL` on
// the same machine with the same state dir finds it there. A token is never
// passed on a command line (/proc/PID/cmdline is world-readable): it comes
// from a file (--token-file) or from PYEXEC_TOKEN, whose value the process
// removes from its own environment once read.

// TokenFileName is the name of the generated token's file in the state dir.
const TokenFileName = "server-token"

// maxTokenBytes bounds what is read from a token file.
const maxTokenBytes = 4096

// TokenFile is where the generated token of a server using stateDir lives.
func TokenFile(stateDir string) string { return filepath.Join(stateDir, TokenFileName) }

// LoadOrCreateToken returns the token in stateDir's token file, creating
// the file (mode 0600, 32 random bytes as hex) when there is none. A file
// that others can read, or that is not a regular file, is refused: the
// token is only as secret as its file.
func LoadOrCreateToken(stateDir string) (token, path string, created bool, err error) {
	path = TokenFile(stateDir)
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return "", path, false, fmt.Errorf("token file: %w", err)
	}
	var b [32]byte
	rand.Read(b[:])
	token = hex.EncodeToString(b[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	switch {
	case err == nil:
		_, werr := f.WriteString(token + "\n")
		serr := f.Sync()
		if err := errors.Join(werr, serr, f.Close()); err != nil {
			os.Remove(path)
			return "", path, false, fmt.Errorf("write token file %s: %w", path, err)
		}
		return token, path, true, nil
	case errors.Is(err, fs.ErrExist):
		token, mode, err := ReadTokenFile(path)
		if err != nil {
			return "", path, false, err
		}
		if mode.Perm()&0o077 != 0 {
			return "", path, false, fmt.Errorf("token file %s can be read by other users (mode %04o): run chmod 600 %s, or remove it to get a new token", path, mode.Perm(), path)
		}
		return token, path, false, nil
	}
	return "", path, false, fmt.Errorf("create token file %s: %w", path, err)
}

// ReadTokenFile reads a bearer token from the first line of path (never
// following a symlink at the last component) and returns the file's mode,
// so callers can warn about or refuse a file others can read.
func ReadTokenFile(path string) (string, fs.FileMode, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return "", 0, fmt.Errorf("token file %s is a symlink; give the file itself", path)
		}
		return "", 0, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("token file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("token file %s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return "", 0, fmt.Errorf("token file %s: %w", path, err)
	}
	if len(data) > maxTokenBytes {
		return "", 0, fmt.Errorf("token file %s is larger than %d bytes; it should hold one token", path, maxTokenBytes)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	token := strings.TrimSpace(line)
	if err := CheckToken(token); err != nil {
		return "", 0, fmt.Errorf("token file %s: %w", path, err)
	}
	return token, st.Mode(), nil
}

// WeakTokenLength is the length under which a given token is warned about
// (a generated one has 64 characters).
const WeakTokenLength = 16

// CheckToken refuses tokens that cannot travel in an HTTP header.
func CheckToken(token string) error {
	switch {
	case token == "":
		return errors.New("the token is empty")
	case strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f || r > '~' }):
		return errors.New("the token must be printable ASCII without spaces")
	}
	return nil
}

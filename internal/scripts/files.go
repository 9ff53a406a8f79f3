package scripts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// headBytes is how much of a script is read to list it: the docstring and
// the PEP 723 header live at the top.
const headBytes = 16 << 10

func readHead(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("scripts: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, headBytes))
	if err != nil {
		return "", fmt.Errorf("scripts: read %s: %w", path, err)
	}
	return string(b), nil
}

// writeAtomic writes data beside path and renames it into place, so a
// reader never sees half a file. Files are private to the server's user:
// code and call arguments can hold secrets, and runs never read them here
// (a saved script runs as inline code from the engine's own code dir).
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("scripts: write %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o600)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("scripts: write %s: %w", path, werr)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("scripts: encode %s: %w", path, err)
	}
	return writeAtomic(path, append(b, '\n'))
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

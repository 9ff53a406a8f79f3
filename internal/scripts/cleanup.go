package scripts

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RemoveAutosaved deletes the autosaved entries (code and sidecar) whose
// sidecar matches, and returns how many it removed. The job clean-up tools
// use it to drop the code of jobs that no longer exist.
func (s *Store) RemoveAutosaved(match func(Sidecar) bool) (int, error) {
	entries, err := os.ReadDir(s.autoDir)
	if err != nil {
		return 0, fmt.Errorf("autosaved scripts: %w", err)
	}
	n := 0
	var errs error
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.autoDir, e.Name()))
		if err != nil {
			continue // removed meanwhile (retention)
		}
		var side Sidecar
		if json.Unmarshal(data, &side) != nil || !match(side) {
			continue
		}
		for _, ext := range []string{".py", ".json"} {
			if err := os.Remove(filepath.Join(s.autoDir, name+ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = errors.Join(errs, err)
			}
		}
		n++
	}
	return n, errs
}

package engine

import (
	"fmt"
	"os"
)

// handOver gives a directory the server made to the run user (on Windows
// runs are not confined by user; only the mode is set).
func handOver(dir string, uid, gid int) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("hand %s to the run user: %w", dir, err)
	}
	return nil
}

package mcpserver

import (
	"errors"
	"fmt"

	"github.com/pyexec/pyexec/internal/jobs"
)

// toolError words an executor's error for the model: what happened and
// what to do. Request errors already name their field and pass through.
func toolError(err error) error {
	switch {
	case err == nil:
		return nil
	case jobs.IsStorageFull(err) && !errors.Is(err, jobs.ErrStateFull):
		return fmt.Errorf("the server's state dir is full (%v): free space there, or remove finished jobs with prune_jobs", err)
	}
	return err
}

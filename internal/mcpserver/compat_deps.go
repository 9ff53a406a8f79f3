package mcpserver

import (
	"errors"

	"github.com/pyexec/pyexec/internal/engine"
)

// applyDependencies puts the seed's dependencies list on a request. This
// build's engine cannot install dependencies yet (engine.Request has no
// Dependencies field), so a non-empty list is rejected rather than silently
// ignored; an empty list, as in the seed's own examples, runs as usual.
func applyDependencies(_ *engine.Request, deps []string) error {
	if len(deps) > 0 {
		return errors.New("dependencies: installing dependencies is not available yet in this build of pyexec; pass an empty list or run code that needs only the standard library and packages already installed")
	}
	return nil
}

package mcpserver

import "github.com/pyexec/pyexec/internal/engine"

// applyDependencies puts the seed's dependencies list on a request; the
// engine installs them into a cached uv environment (an empty list, as in
// the seed's own examples, runs as usual).
func applyDependencies(req *engine.Request, deps []string) error {
	req.Dependencies = append(req.Dependencies, deps...)
	return nil
}

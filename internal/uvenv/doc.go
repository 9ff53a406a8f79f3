// Package uvenv turns "this code needs these packages" into a Python
// environment that can be exec'ed directly, built once with uv and cached.
//
// The seeds ran `uv run --with ...` on every call: a resolution, an overlay
// venv and an extra process tree each time. uvenv resolves once, installs into
// a venv under <state-dir>/envs/<key>, makes it read-only, and afterwards hands
// out the venv's own bin/python: a cache hit runs no uv at all, only a lock,
// a small JSON read and a couple of stats.
//
// Concerns, one file each:
//
//	requirements.go  PEP 508 / PEP 503 names, the normalized requirement list
//	script.go        PEP 723 inline script metadata (# /// script)
//	pyversion.go     requires-python checks (a small PEP 440 subset)
//	project.go       pyproject.toml / uv.lock discovery (uv-project strategy)
//	key.go           index settings and the content key of an environment
//	uv.go            finding and running uv, progress from its stderr
//	lock.go          flock-based locks shared by processes using one state dir
//	build.go         building an environment aside and publishing it atomically
//	cache.go         manifests, last use, List, Prune and LRU eviction
//	manager.go       Manager.Ensure: the entry point the engine calls
package uvenv

// Package pathwalk resolves a path one component at a time, as the kernel
// does, and reports every symlink met on the way. Callers that decide what a
// run may reach, or whether the server may execute something, need those
// links, not just the final path filepath.EvalSymlinks gives.
package pathwalk

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxLinks is the kernel's limit on symlinks followed in one resolution.
const maxLinks = 40

// Link is a symlink met while resolving: where it is (its parent already
// resolved) and its target as stored.
type Link struct {
	Path   string
	Target string
}

// Resolve returns the real path p names, taken from "/", and the symlinks met
// in the order they were followed. It fails when a component is missing or
// when more than 40 links are followed.
func Resolve(p string) (string, []Link, error) {
	var links []Link
	cur := "/"
	rest := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		st, err := os.Lstat(next)
		if err != nil {
			return "", nil, err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if len(links) >= maxLinks {
			return "", nil, fmt.Errorf("%s: too many symlinks", p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", nil, err
		}
		links = append(links, Link{Path: next, Target: target})
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return cur, links, nil
}

package uvenv

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// IndexSettings say where uv may look for packages. They are passed to uv as
// flags and are part of the cache key: the same requirement list resolved
// against another index is another environment.
type IndexSettings struct {
	IndexURL       string   `json:"index_url,omitempty"`
	ExtraIndexURLs []string `json:"extra_index_urls,omitempty"`
	FindLinks      []string `json:"find_links,omitempty"`
	NoIndex        bool     `json:"no_index,omitempty"`
	// Offline forbids network access. It is not part of the key: it changes
	// whether uv may download, not which packages are meant.
	Offline bool `json:"offline,omitempty"`
}

// merge layers override on top of base: set scalars win, lists append.
func (base IndexSettings) merge(override IndexSettings) IndexSettings {
	out := base
	if override.IndexURL != "" {
		out.IndexURL = override.IndexURL
	}
	out.ExtraIndexURLs = append(append([]string(nil), base.ExtraIndexURLs...), override.ExtraIndexURLs...)
	out.FindLinks = append(append([]string(nil), base.FindLinks...), override.FindLinks...)
	out.NoIndex = base.NoIndex || override.NoIndex
	out.Offline = base.Offline || override.Offline
	return out
}

// args renders the settings as uv command-line flags.
func (s IndexSettings) args() []string {
	var a []string
	if s.IndexURL != "" {
		a = append(a, "--index-url", s.IndexURL)
	}
	for _, u := range s.ExtraIndexURLs {
		a = append(a, "--extra-index-url", u)
	}
	for _, f := range s.FindLinks {
		a = append(a, "--find-links", f)
	}
	if s.NoIndex {
		a = append(a, "--no-index")
	}
	if s.Offline {
		a = append(a, "--offline")
	}
	return a
}

// resolutionEnv lists the uv environment variables that change what a
// resolution produces. Their values (from the server's environment) go into
// the key, so changing UV_INDEX_URL does not silently reuse old envs.
var resolutionEnv = []string{
	"UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX",
	"UV_FIND_LINKS", "UV_NO_INDEX", "UV_INDEX_STRATEGY", "UV_PRERELEASE",
	"UV_RESOLUTION", "UV_EXCLUDE_NEWER", "UV_CONFIG_FILE", "UV_NO_CONFIG",
	"UV_TORCH_BACKEND", "UV_CONSTRAINT", "UV_OVERRIDE",
}

// resolutionEnvValues returns "NAME=value" for every resolutionEnv variable
// set in environ, sorted.
func resolutionEnvValues(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		for _, r := range resolutionEnv {
			if name == r {
				out = append(out, kv)
			}
		}
	}
	sort.Strings(out)
	return out
}

// keyVersion changes whenever the layout or build recipe of an environment
// changes, so old envs are never mistaken for new ones.
const keyVersion = "pyexec-uvenv-1"

// contentKey hashes the parts that define an environment into its cache key.
// Every part is length-prefixed so no two different part lists collide.
func contentKey(parts ...string) string {
	h := sha256.New()
	for _, p := range append([]string{keyVersion}, parts...) {
		var n [8]byte
		l := len(p)
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func indexKeyParts(s IndexSettings, environ []string) []string {
	parts := []string{"index-url", s.IndexURL, "extra", strings.Join(s.ExtraIndexURLs, "\n"),
		"find-links", strings.Join(s.FindLinks, "\n")}
	if s.NoIndex {
		parts = append(parts, "no-index")
	}
	return append(parts, resolutionEnvValues(environ)...)
}

package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// interpCache keeps what probing interpreters found across restarts, in
// the state dir, so that a new server (or `pyexec doctor`) knows the
// machine's interpreters without starting each one again.
//
// An entry is used only while the probed file is the very file that was
// probed (device, inode, size, mtime and ctime unchanged) and so is the
// executable it reported: replacing, rewriting or touching either one
// makes the entry stale. Only real binaries are kept (pyenv shims are
// followed without being executed, see pyenvshim.go, and what a script
// wrapper leads to can change without the script changing). The file is
// read only when it is the server's own (privateFile: its uid's, mode
// 0600, in a directory no one else can replace it in); whatever it says is
// checked again (probe still refuses paths in run-writable trees), so it
// can only save a probe.
type interpCache struct {
	path string

	mu     sync.Mutex
	data   interpCacheData
	loaded bool
	dirty  bool
}

type interpCacheData struct {
	Version int `json:"version"`
	// Probes by the probed path's statKey.
	Probes map[string]cachedProbe `json:"probes"`
	// UV is the last `uv python list` answer (slow: it runs in the
	// background, see discover.go).
	UV *cachedList `json:"uv,omitempty"`
}

type cachedProbe struct {
	Executable string `json:"executable"`
	ExecKey    string `json:"exec_key"` // statKey of Executable
	Version    string `json:"version"`
}

type cachedList struct {
	Paths []string  `json:"paths"`
	At    time.Time `json:"at"`
}

const (
	interpCacheVersion = 1
	interpCacheMax     = 1 << 20 // bytes
	interpCacheEntries = 256
)

func newInterpCache(stateDir string) *interpCache {
	if stateDir == "" {
		return &interpCache{}
	}
	return &interpCache{path: filepath.Join(stateDir, "interpreters.json")}
}

// load reads the file once (a missing, foreign or broken file is an empty
// cache). The caller holds c.mu.
func (c *interpCache) load() {
	if c.loaded {
		return
	}
	c.loaded = true
	c.data = interpCacheData{Version: interpCacheVersion, Probes: map[string]cachedProbe{}}
	if c.path == "" {
		return
	}
	lfi, err := os.Lstat(c.path) // no symlink
	if err != nil || !lfi.Mode().IsRegular() {
		return
	}
	f, err := os.Open(c.path)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !os.SameFile(fi, lfi) || fi.Size() > interpCacheMax || !privateFile(c.path, fi) {
		return
	}
	var d interpCacheData
	if json.NewDecoder(io.LimitReader(f, interpCacheMax)).Decode(&d) != nil || d.Version != interpCacheVersion {
		return
	}
	if d.Probes == nil {
		d.Probes = map[string]cachedProbe{}
	}
	c.data = d
}

// probe returns what probing the file with key found, while the
// executable it named is unchanged.
func (c *interpCache) probe(key string) (Interpreter, bool) {
	if key == "" {
		return Interpreter{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	p, ok := c.data.Probes[key]
	if !ok || p.Executable == "" || !filepath.IsAbs(p.Executable) {
		return Interpreter{}, false
	}
	fi, err := os.Stat(p.Executable)
	if err != nil || statKey(p.Executable, fi) != p.ExecKey {
		return Interpreter{}, false
	}
	return Interpreter{Path: p.Executable, Version: p.Version}, true
}

// remember records a probe of a real binary (key is its statKey).
func (c *interpCache) remember(key string, it Interpreter) {
	if key == "" {
		return
	}
	fi, err := os.Stat(it.Path)
	if err != nil {
		return
	}
	p := cachedProbe{Executable: it.Path, ExecKey: statKey(it.Path, fi), Version: it.Version}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	if old, ok := c.data.Probes[key]; ok && old == p {
		return
	}
	if len(c.data.Probes) >= interpCacheEntries {
		c.data.Probes = map[string]cachedProbe{}
	}
	c.data.Probes[key] = p
	c.dirty = true
}

// uvList is the last known `uv python list` answer, if any.
func (c *interpCache) uvList() (cachedList, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	if c.data.UV == nil {
		return cachedList{}, false
	}
	return *c.data.UV, true
}

func (c *interpCache) setUVList(paths []string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	c.data.UV = &cachedList{Paths: paths, At: at}
	c.dirty = true
}

// save writes the cache if it changed: a new file renamed over the old
// one, readable by the server's user only.
func (c *interpCache) save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" || !c.dirty {
		return nil
	}
	data, err := json.Marshal(c.data)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".interpreters-*")
	if err != nil {
		return fmt.Errorf("interpreter cache: %w", err)
	}
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("interpreter cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("interpreter cache: %w", err)
	}
	c.dirty = false
	return nil
}

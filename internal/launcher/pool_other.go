//go:build !linux

package launcher

import (
	"sync/atomic"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Pool off Linux starts every run itself: there is no launcher to start
// ahead (see MaybeRun).
type Pool struct {
	size  int
	fresh atomic.Uint64
}

// NewPool returns a pool whose Start is launcher.Start.
func NewPool(exe string, size int) *Pool { return &Pool{size: size} }

// PoolStats says how cold runs got their launcher.
type PoolStats struct {
	Size   int    `json:"size" jsonschema:"Launchers kept started ahead (--prestart)."`
	Ready  int    `json:"ready" jsonschema:"Launchers waiting for a run now."`
	Served uint64 `json:"served" jsonschema:"Runs handed to a launcher started ahead."`
	Fresh  uint64 `json:"fresh" jsonschema:"Runs that found none ready and exec'd a launcher of their own."`
}

// Stats reports the pool's use: off Linux every run is fresh.
func (p *Pool) Stats() PoolStats { return PoolStats{Fresh: p.fresh.Load()} }

// Start is launcher.Start.
func (p *Pool) Start(spec Spec, opts Options) (*Process, error) {
	p.fresh.Add(1)
	return Start(spec, opts)
}

// SetWait does nothing off Linux.
func (p *Pool) SetWait(wait bool) {}

// Expect does nothing off Linux.
func (p *Pool) Expect(cred *sandbox.Credential) {}

// Wait does nothing off Linux: Process.Wait returns when all is gone.
func (p *Pool) Wait() {}

// Close does nothing.
func (p *Pool) Close() {}

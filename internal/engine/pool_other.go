//go:build !linux

package engine

import (
	"runtime"
	"sync"

	"github.com/pyexec/pyexec/internal/launcher"
)

// WarmUnsupported says why warm interpreters are off on this platform: a
// warm run is a fork of a running interpreter without exec, which macOS
// does not support safely (system frameworks and the Objective-C runtime
// may hold locks in the parent, and Python itself warns about it), and
// Windows has no fork at all. Every run starts a fresh interpreter.
const WarmUnsupported = "warm interpreters need fork without exec, which is unsafe on macOS and missing on Windows: every run on " + runtime.GOOS + " starts a fresh interpreter"

// warmPool is never created off Linux.
type warmPool struct{ cleanups sync.WaitGroup }

// warmRun is never returned off Linux.
type warmRun = launcher.Process

func newWarmPool(*Engine) *warmPool { return nil }

func (w *warmPool) start(*prepared, launcher.Options) *warmRun { return nil }

func (w *warmPool) statsSnapshot() WarmStats { return WarmStats{} }

func (w *warmPool) close() {}

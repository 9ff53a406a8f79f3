//go:build !linux

package workspace

// Off Linux there is no inotify: runs report no changed files, and say so.

// Watcher reports no changes off Linux.
type Watcher struct{}

// NewWatcher returns a watcher that watches nothing.
func NewWatcher(root *Root) *Watcher { return &Watcher{} }

// Span is one run's view of the watcher.
type Span struct{}

// Begin starts a run's span.
func (w *Watcher) Begin() *Span { return &Span{} }

// End says the workspace is not watched on this platform.
func (s *Span) End(rights Rights) ([]Change, string) {
	return nil, "changed files are not tracked on this platform (no inotify)"
}

// Close does nothing.
func (w *Watcher) Close() error { return nil }

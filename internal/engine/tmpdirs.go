package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// tmpDirs hands out the runs' private temp dirs. Making a directory on the
// state dir's filesystem and removing one with its content cost a fraction
// of a millisecond each, which on the warm path is a tenth of a run: a few
// are made ahead in the background, and finished ones are removed after the
// result is out. Close waits for both.
type tmpDirs struct {
	root     string
	fallback string // where get makes them once root is gone (after Close)
	ready    chan string

	mu      sync.Mutex
	closed  bool
	spare   map[string]bool // made ahead, not handed out yet
	bg      sync.WaitGroup  // the filler
	pending sync.WaitGroup  // removals in flight
	wake    chan struct{}
	quit    chan struct{}
}

// tmpDirsAhead is how many temp dirs are kept made ahead.
const tmpDirsAhead = 4

func newTmpDirs(root, fallback string) *tmpDirs {
	t := &tmpDirs{root: root, fallback: fallback, ready: make(chan string, tmpDirsAhead), spare: map[string]bool{}, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	t.bg.Add(1)
	go t.fill()
	return t
}

// fill keeps the ready channel full once runs have started (an engine that
// never runs anything makes none).
func (t *tmpDirs) fill() {
	defer t.bg.Done()
	for {
		select {
		case <-t.quit:
			return
		case <-t.wake:
		}
		for len(t.ready) < cap(t.ready) {
			d, err := os.MkdirTemp(t.root, "run-")
			if err != nil {
				break // get makes its own and reports the error
			}
			t.mu.Lock()
			t.spare[d] = true
			t.mu.Unlock()
			select {
			case t.ready <- d:
			default:
				os.RemoveAll(d)
			}
		}
	}
}

// get returns a new empty directory for one run.
func (t *tmpDirs) get() (string, error) {
	select {
	case d := <-t.ready:
		t.mu.Lock()
		delete(t.spare, d)
		t.mu.Unlock()
		t.refill()
		return d, nil
	default:
	}
	t.refill()
	d, err := os.MkdirTemp(t.root, "run-")
	if errors.Is(err, fs.ErrNotExist) && t.fallback != "" {
		// A run after Close: the temp dir filesystem is gone, the state
		// dir's tmp/ is not.
		d, err = os.MkdirTemp(t.fallback, "run-")
	}
	if err != nil {
		return "", fmt.Errorf("create run temp dir: %w", err)
	}
	return d, nil
}

func (t *tmpDirs) refill() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// remove deletes a run's temp dir in the background.
func (t *tmpDirs) remove(d string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		os.RemoveAll(d)
		return
	}
	t.pending.Add(1)
	go func() {
		defer t.pending.Done()
		os.RemoveAll(d)
	}()
}

// isSpare reports whether d was made ahead and not handed out yet.
func (t *tmpDirs) isSpare(d string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.spare[d]
}

// close stops making dirs, removes the unused ones and waits for pending
// removals.
func (t *tmpDirs) close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	close(t.quit)
	t.mu.Unlock()
	t.bg.Wait()
	t.pending.Wait()
	for {
		select {
		case d := <-t.ready:
			os.RemoveAll(d)
		default:
			return
		}
	}
}

package workspace

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Why inotify: a run must learn which workspace files it made, and a walk
// of a large workspace at the end of every run (stat of 10,000 files: tens
// of milliseconds) would cost more than the run itself. The kernel queues
// an event for every change as it happens, whoever makes it and through
// whichever mount (a run's bind or idmapped view of the workspace is the
// same inode), so a run's end only has to read what is queued: a few
// microseconds when nothing changed. The watches are set up once, the
// first time a run begins, and follow new directories as they appear.
//
// Who wrote what: inotify does not say which process made a change. The
// watcher reads the queue at every run's start and end (and every
// watchTick), so it knows which runs were active between two reads: a
// change read while exactly one run was active is that run's; one read
// while several were active is reported to each of them, marked
// concurrent (the one thing that cannot be told apart without tracing
// every process). Changes made while no run was active (the files tools,
// the host) are nobody's.

// Bounds of the changed-file tracking.
const (
	MaxHashBytes    = 64 << 20 // files larger are reported without a checksum
	maxReported     = 100      // changes listed per run
	maxTracked      = 10000    // paths remembered per run
	maxWatchedDirs  = 50000    // directories watched per workspace
	watchTick       = 250 * time.Millisecond
	inotifyMask     = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK
	inotifyReadSize = 64 << 10
)

// skipDirs are directories whose changes are tools' bookkeeping, not
// results: byte-code caches, version control, environments.
var skipDirs = map[string]bool{"__pycache__": true, ".git": true, ".hg": true, ".svn": true, ".venv": true,
	".mypy_cache": true, ".pytest_cache": true, ".ruff_cache": true, ".ipynb_checkpoints": true, "node_modules": true}

func skipped(name string) bool {
	return skipDirs[name] || strings.HasSuffix(name, ".pyc") || strings.Contains(name, ".pyexec-")
}

// Watcher tracks the changes runs make in one workspace. It is safe for
// concurrent use.
type Watcher struct {
	root *Root

	mu      sync.Mutex
	started bool
	off     string // why tracking is off ("" while it works)
	fd      int
	wds     map[int32]string // watch -> directory, relative ("" is the root)
	active  map[*Span]struct{}
	buf     []byte
	stop    chan struct{}
	stopped chan struct{}
}

// NewWatcher makes a watcher for root; nothing is watched until the first
// Begin.
func NewWatcher(root *Root) *Watcher {
	return &Watcher{root: root, fd: -1, wds: map[int32]string{}, active: map[*Span]struct{}{}}
}

// Span is one run's window of changes, from Begin to End.
type Span struct {
	w       *Watcher
	changes map[string]*change
	note    string
}

type change struct {
	first, last string
	concurrent  bool
}

// Begin starts tracking a run's changes.
func (w *Watcher) Begin() *Span {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		w.startLocked()
	}
	s := &Span{w: w, changes: map[string]*change{}}
	if w.off != "" {
		s.note = w.off
		return s
	}
	w.drainLocked() // what came before is not this run's
	w.active[s] = struct{}{}
	return s
}

// End stops tracking and returns the run's changes, checked against the
// files as they are now (a file created and removed again is not listed),
// and a note when the list may be incomplete. Files are read, for their
// checksum, with rights.
func (s *Span) End(rights Rights) ([]Change, string) {
	w := s.w
	w.mu.Lock()
	if _, ok := w.active[s]; ok {
		w.drainLocked()
		delete(w.active, s)
	}
	paths := make([]string, 0, len(s.changes))
	for p := range s.changes {
		paths = append(paths, p)
	}
	changes := s.changes
	note := s.note
	w.mu.Unlock()

	slices.Sort(paths)
	var out []Change
	more := 0
	for _, p := range paths {
		c := changes[p]
		ch, ok := w.describe(p, c, rights)
		if !ok {
			continue
		}
		if len(out) == maxReported {
			more++
			continue
		}
		out = append(out, ch)
	}
	if more > 0 {
		note = strings.TrimPrefix(note+fmt.Sprintf("; %d more changed files are not listed", more), "; ")
	}
	return out, note
}

// describe checks one changed path now. Only regular files are reported.
func (w *Watcher) describe(rel string, c *change, rights Rights) (Change, bool) {
	abs := w.root.dir + "/" + rel
	ch := Change{Path: rel, MIME: MIMEType(rel), Concurrent: c.concurrent, Kind: "modified"}
	if c.first == "created" {
		ch.Kind = "created"
	}
	fi, err := w.root.Stat(abs, rights)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if c.first == "created" {
			return Change{}, false // made and removed within the run
		}
		ch.Kind = "deleted"
		return ch, true
	case err != nil || fi.Type != "file":
		return Change{}, false
	}
	ch.Size = fi.Size
	if fi.Size <= MaxHashBytes {
		if f, _, err := w.root.OpenFile(abs, rights); err == nil {
			h := sha256.New()
			if _, err := io.Copy(h, f); err == nil {
				ch.SHA256 = hexSum(h)
			}
			f.Close()
		}
	}
	return ch, true
}

// Close stops watching.
func (w *Watcher) Close() error {
	w.mu.Lock()
	stop, stopped := w.stop, w.stopped
	w.stop = nil
	w.mu.Unlock()
	if stop == nil {
		return nil
	}
	close(stop)
	<-stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
	w.off = "changed-file tracking has stopped"
	return nil
}

// startLocked opens the inotify queue and watches the tree.
func (w *Watcher) startLocked() {
	w.started = true
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		w.off = "changed files are not tracked: inotify is unavailable (" + err.Error() + ")"
		return
	}
	w.fd = fd
	w.buf = make([]byte, inotifyReadSize)
	if err := w.watchTreeLocked("", nil); err != nil {
		w.offLocked(err)
		return
	}
	w.stop, w.stopped = make(chan struct{}), make(chan struct{})
	go w.tick(w.stop, w.stopped)
}

// offLocked turns tracking off for good, saying why.
func (w *Watcher) offLocked(err error) {
	w.off = "changed files are not tracked: " + err.Error()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
	w.wds = map[int32]string{}
	for s := range w.active {
		s.note = w.off
		delete(w.active, s)
	}
}

// tick drains the queue regularly, so that it never overflows between
// runs and new directories are watched before files appear in them.
func (w *Watcher) tick(stop, stopped chan struct{}) {
	defer close(stopped)
	t := time.NewTicker(watchTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			w.mu.Lock()
			if w.fd >= 0 {
				w.drainLocked()
			}
			w.mu.Unlock()
		}
	}
}

// watchTreeLocked watches directory rel and every directory below it,
// opened race-free from the workspace root (a directory swapped for a
// symlink is never followed out). With found set, the regular files met
// are reported to it (a new directory's files may predate its watch).
func (w *Watcher) watchTreeLocked(rel string, found func(rel string)) error {
	var parts []string
	if rel != "" {
		parts = strings.Split(rel, "/")
	}
	fd, _, err := walk(w.root.dir, parts, ServerRights, false)
	if err != nil {
		return nil // gone, or replaced by a symlink meanwhile: nothing to watch
	}
	defer unix.Close(fd)
	return w.watchDirLocked(fd, rel, found)
}

func (w *Watcher) watchDirLocked(pathFD int, rel string, found func(rel string)) error {
	if len(w.wds) >= maxWatchedDirs {
		return fmt.Errorf("the workspace has more than %d directories", maxWatchedDirs)
	}
	wd, err := unix.InotifyAddWatch(w.fd, fmt.Sprintf("/proc/self/fd/%d", pathFD), inotifyMask)
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return errors.New("the system's inotify watch limit (fs.inotify.max_user_watches) is reached")
		}
		return nil // a directory that cannot be watched is skipped
	}
	w.wds[int32(wd)] = rel
	dfd, err := openat2(pathFD, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil
	}
	d := os.NewFile(uintptr(dfd), rel)
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		name := e.Name()
		child := path.Join(rel, name)
		if skipped(name) || w.root.isHidden(w.root.dir+"/"+child) {
			continue
		}
		switch {
		case e.Type().IsDir():
			sub, err := openat2(pathFD, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
			if err != nil {
				continue
			}
			err = w.watchDirLocked(sub, child, found)
			unix.Close(sub)
			if err != nil {
				return err
			}
		case e.Type().IsRegular() && found != nil:
			found(child)
		}
	}
	return nil
}

// drainLocked reads every queued event and records it for the active
// spans.
func (w *Watcher) drainLocked() {
	for w.fd >= 0 {
		n, err := unix.Read(w.fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return // EAGAIN: nothing more queued
		}
		w.parseLocked(w.buf[:n])
	}
}

func (w *Watcher) parseLocked(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return
		}
		name := string(b[unix.SizeofInotifyEvent:end])
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		wd, mask := ev.Wd, ev.Mask
		b = b[end:]
		w.eventLocked(wd, mask, name)
	}
}

func (w *Watcher) eventLocked(wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		for s := range w.active {
			s.note = "more changes happened at once than the kernel queues: the list may be incomplete"
		}
		// Re-watch everything: directories made meanwhile were missed.
		for wd := range w.wds {
			unix.InotifyRmWatch(w.fd, uint32(wd))
		}
		w.wds = map[int32]string{}
		if err := w.watchTreeLocked("", nil); err != nil {
			w.offLocked(err)
		}
		return
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(w.wds, wd)
		return
	}
	dir, ok := w.wds[wd]
	if !ok || name == "" || skipped(name) {
		return
	}
	rel := path.Join(dir, name)
	if w.root.isHidden(w.root.dir + "/" + rel) {
		return
	}
	if mask&unix.IN_ISDIR != 0 {
		switch {
		case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			record := func(p string) { w.recordLocked(p, "created") }
			if len(w.active) == 0 {
				record = nil
			}
			if err := w.watchTreeLocked(rel, record); err != nil {
				w.offLocked(err)
			}
		case mask&unix.IN_MOVED_FROM != 0:
			// Moved away (out of the workspace, or to a name IN_MOVED_TO
			// re-watches): forget the watches below the old name.
			for wd, d := range w.wds {
				if d == rel || strings.HasPrefix(d, rel+"/") {
					unix.InotifyRmWatch(w.fd, uint32(wd))
					delete(w.wds, wd)
				}
			}
		}
		return
	}
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		w.recordLocked(rel, "created")
	case mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
		w.recordLocked(rel, "deleted")
	default:
		w.recordLocked(rel, "modified")
	}
}

func (w *Watcher) recordLocked(rel, kind string) {
	concurrent := len(w.active) > 1
	for s := range w.active {
		c := s.changes[rel]
		if c == nil {
			if len(s.changes) >= maxTracked {
				s.note = fmt.Sprintf("more than %d paths changed: the list is incomplete", maxTracked)
				continue
			}
			c = &change{first: kind}
			s.changes[rel] = c
		}
		c.last = kind
		c.concurrent = c.concurrent || concurrent
	}
}

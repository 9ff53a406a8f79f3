package scripts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// autosaveQueue is how many autosaves may wait for the writer. A burst
// beyond it drops autosaves (counted and logged) rather than slowing runs.
const autosaveQueue = 256

// stampLayout starts every autosaved name, so names sort by time and the
// retention can read an entry's age without a stat.
const stampLayout = "20060102T150405.000000Z"

// AutosaveRecord is one inline run to remember.
type AutosaveRecord struct {
	// Tool is the MCP tool (or front end) that ran the code.
	Tool string
	Code string
	// Arguments are the call's other arguments, encoded as JSON by the
	// writer; callers pass a value they will not mutate, secrets redacted.
	Arguments any
	JobID     string
}

type autosaveItem struct {
	flushed chan struct{} // a Flush marker, not a record
	name    string
	at      time.Time
	rec     AutosaveRecord
}

type autosaver struct {
	s       *Store
	mu      sync.RWMutex // guards closed against sends on a closed queue
	closed  bool
	queue   chan autosaveItem
	done    chan struct{}
	dropped atomic.Int64
	seq     atomic.Int64

	names []string // autosaved entries, oldest first (writer goroutine only)
}

func startAutosaver(s *Store) (*autosaver, error) {
	a := &autosaver{s: s, queue: make(chan autosaveItem, autosaveQueue), done: make(chan struct{})}
	des, err := os.ReadDir(s.autoDir)
	if err != nil {
		return nil, fmt.Errorf("scripts: list %s: %w", s.autoDir, err)
	}
	for _, de := range des {
		if name, ok := strings.CutSuffix(de.Name(), ".py"); ok {
			if _, ok := stampOf(name); ok {
				a.names = append(a.names, name)
			}
		}
	}
	slices.Sort(a.names)
	a.prune()
	go a.loop()
	return a, nil
}

// Autosave queues rec to be written in the background and returns the name
// it will have (for view_script with autosaved: true). It never blocks and
// never fails the run: a full queue drops the record, and write errors are
// logged. Code over MaxScriptBytes (which no run accepts) is not kept.
// Autosave is off when the store's MaxAutosaved is negative; the
// returned name is then empty.
func (s *Store) Autosave(rec AutosaveRecord) string {
	if s == nil || s.opts.MaxAutosaved < 0 || rec.Code == "" || len(rec.Code) > MaxScriptBytes {
		return ""
	}
	a := s.auto
	at := s.opts.Now().UTC()
	// The sequence number keeps names unique when the same code is run twice
	// in the same microsecond; the hash prefix tells runs of the same code.
	name := fmt.Sprintf("%s-%s-%d", at.Format(stampLayout), sha(rec.Code)[:8], a.seq.Add(1))
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return ""
	}
	select {
	case a.queue <- autosaveItem{name: name, at: at, rec: rec}:
		return name
	default:
		if n := a.dropped.Add(1); n == 1 || n%100 == 0 {
			s.log.Warn("autosave queue full; inline code not autosaved", "dropped_total", n)
		}
		return ""
	}
}

// Flush waits until everything queued before it is written (tests,
// shutdown). Unlike Autosave it blocks while the queue is full.
func (s *Store) Flush() {
	a := s.auto
	a.mu.RLock()
	if a.closed {
		a.mu.RUnlock()
		return
	}
	done := make(chan struct{})
	a.queue <- autosaveItem{flushed: done}
	a.mu.RUnlock()
	<-done
}

func (a *autosaver) close() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.queue)
	}
	a.mu.Unlock()
	<-a.done
}

func (a *autosaver) loop() {
	defer close(a.done)
	for it := range a.queue {
		if it.flushed != nil {
			close(it.flushed)
			continue
		}
		if err := a.write(it); err != nil {
			a.s.log.Warn("autosave failed", "name", it.name, "err", err)
			continue
		}
		a.names = append(a.names, it.name)
		a.prune()
	}
}

func (a *autosaver) write(it autosaveItem) error {
	// Round-trip through JSON so the sidecar holds the arguments as the
	// wire saw them (field names, omitted empties).
	var args map[string]any
	if b, err := json.Marshal(it.rec.Arguments); err != nil {
		return fmt.Errorf("encode arguments: %w", err)
	} else if err := json.Unmarshal(b, &args); err != nil {
		args = map[string]any{"value": json.RawMessage(b)}
	}
	side := Sidecar{Name: it.name, SavedAt: it.at, CodeSHA256: sha(it.rec.Code), Tool: it.rec.Tool, Arguments: args, JobID: it.rec.JobID}
	if err := writeAtomic(filepath.Join(a.s.autoDir, it.name+".py"), []byte(it.rec.Code)); err != nil {
		return err
	}
	return writeJSON(filepath.Join(a.s.autoDir, it.name+".json"), side)
}

// prune removes the oldest autosaved entries beyond the count and every
// entry older than the maximum age.
func (a *autosaver) prune() {
	cutoff := a.s.opts.Now().Add(-a.s.opts.MaxAge)
	n := 0
	for n < len(a.names) {
		t, _ := stampOf(a.names[n])
		if len(a.names)-n <= a.s.opts.MaxAutosaved && !t.Before(cutoff) {
			break
		}
		for _, ext := range []string{".py", ".json"} {
			if err := os.Remove(filepath.Join(a.s.autoDir, a.names[n]+ext)); err != nil && !os.IsNotExist(err) {
				a.s.log.Warn("autosave retention: remove failed", "err", err)
			}
		}
		n++
	}
	a.names = a.names[n:]
}

func stampOf(name string) (time.Time, bool) {
	if len(name) < len(stampLayout) {
		return time.Time{}, false
	}
	t, err := time.Parse(stampLayout, name[:len(stampLayout)])
	return t, err == nil
}

package jobs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// DefaultLogCap is the default budget of one job's output logs: stdout and
// stderr together.
const DefaultLogCap int64 = 64 << 20

// Log file names inside a job's directory <state-dir>/jobs/<id>/.
const (
	stdoutLogName = "stdout.log"
	stderrLogName = "stderr.log"
)

// logState is what is known about one stream's log file.
type logState struct {
	size      int64 // bytes in the file, including a truncation note
	truncated bool
}

// logBudget is the byte budget one job's logs share. Why one budget for both
// streams rather than a cap per file: what a job may put on disk is then one
// number (64 MiB, not 64 per stream and counting). So that a flood on one
// stream cannot silence the other (a traceback after a stdout flood), each
// stream keeps a reserve of its own the other cannot take.
type logBudget struct {
	limit   int64
	reserve int64    // per stream
	used    [2]int64 // stdout, stderr
}

func newLogBudget(limit int64) *logBudget {
	return &logBudget{limit: limit, reserve: min(1<<20, limit/8)}
}

// room is how many more bytes stream i may write.
func (b *logBudget) room(i int) int64 {
	other := b.used[1-i]
	held := max(0, b.reserve-other) // what the other stream may still claim
	return max(0, b.limit-b.used[0]-b.used[1]-held)
}

// logWriter appends one stream of a job to its log file. Why append-only
// files rather than database rows: output can be large and arrives in many
// small chunks; appending to a file costs one write(2) per chunk, cursors are
// plain byte offsets, and readers never see a rewritten file.
//
// Past the job's log budget the writer stops writing, appends a one-line
// note and keeps counting what the script produced, so the job can still
// report the total. A write error (a full state dir) stops the writer the
// same way; the job then ends failed, saying so. Not safe for concurrent
// use: the owning job serialises calls (and the two writers of one job share
// its budget under the job's lock).
type logWriter struct {
	name      string // "stdout" or "stderr", for the note
	index     int    // 0 stdout, 1 stderr: its slot in the budget
	f         *os.File
	mem       []byte // while f is nil: the log held in memory (see spill.go)
	closed    bool   // the run has ended: nothing more is written
	budget    *logBudget
	written   int64 // bytes in the file
	produced  int64 // bytes the script wrote, including dropped ones
	truncated bool
	err       error // first write error; later writes are dropped
}

func createLog(path, name string, index int, budget *logBudget) (*logWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	budget.used[index] += st.Size()
	return &logWriter{name: name, index: index, f: f, budget: budget, written: st.Size()}, nil
}

// write appends p (or as much as the budget allows). It reports whether the
// file grew.
func (w *logWriter) write(p []byte) bool {
	w.produced += int64(len(p))
	if w.truncated || w.err != nil || len(p) == 0 {
		return false
	}
	room := w.budget.room(w.index)
	keep := p
	if int64(len(keep)) > room {
		keep = keep[:room]
	}
	if len(keep) > 0 && w.f == nil {
		w.mem = append(w.mem, keep...)
		w.written += int64(len(keep))
		w.budget.used[w.index] += int64(len(keep))
	} else if len(keep) > 0 {
		n, err := w.f.Write(keep)
		w.written += int64(n)
		w.budget.used[w.index] += int64(n)
		if err != nil {
			w.err = fmt.Errorf("write %s log: %w", w.name, err)
			return n > 0
		}
	}
	if len(keep) < len(p) {
		w.truncated = true
		note := fmt.Sprintf("\n[pyexec: the job's output reached its log budget of %s (stdout and stderr together); further %s was dropped]\n", formatBytes(w.budget.limit), w.name)
		if w.f == nil {
			w.mem = append(w.mem, note...)
			w.written += int64(len(note))
			return true
		}
		n, err := w.f.WriteString(note)
		w.written += int64(n)
		if err != nil {
			w.err = fmt.Errorf("write %s log: %w", w.name, err)
		}
	}
	return true
}

func (w *logWriter) state() logState { return logState{size: w.written, truncated: w.truncated} }

func (w *logWriter) close() error {
	w.closed = true
	if w.f == nil {
		return w.err
	}
	return errors.Join(w.err, w.f.Close())
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// statLog returns the size of a log file; a missing file is an empty log
// (jobs that never started have none).
func statLog(path string, limit int64) (logState, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return logState{}, nil
	}
	if err != nil {
		return logState{}, fmt.Errorf("stat log: %w", err)
	}
	return logState{size: st.Size(), truncated: limit > 0 && st.Size() > limit}, nil
}

// readLog returns the text of path from byte offset off, at most about max
// bytes, never past end (the bytes known to be fully written), and the
// offset to continue from.
//
// UTF-8 choice: offsets are bytes, so a cursor could fall inside a
// multi-byte character. readLog never ends a chunk inside one: an incomplete
// trailing sequence is held back (the next offset stops before it) until the
// rest arrives, unless final says nothing more will be written. So a client
// that follows the returned offsets always gets whole characters, and no byte
// is returned twice. Bytes that are not valid UTF-8 (from the script, or a
// hand-made cursor pointing mid-character) are replaced with U+FFFD in the
// returned text; offsets always count raw bytes.
func readLog(path string, off, end int64, max int, final bool) (string, int64, error) {
	if off > end {
		return "", off, fmt.Errorf("offset %d is past the end of the output (%d bytes so far)", off, end)
	}
	if off == end {
		return "", off, nil
	}
	want := end - off
	if want > int64(max)+utf8.UTFMax {
		want = int64(max) + utf8.UTFMax // peek a little so a cut can finish a character
	}
	f, err := os.Open(path)
	if err != nil {
		return "", off, fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	buf := make([]byte, want)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", off, fmt.Errorf("read log: %w", err)
	}
	buf = buf[:n]
	eof := final && off+int64(n) >= end
	cut := safeCut(buf, max, eof)
	return strings.ToValidUTF8(string(buf[:cut]), "\uFFFD"), off + int64(cut), nil
}

// safeCut returns how many bytes of b to return when at most limit are
// wanted: limit, moved back so that a multi-byte character is not split
// (or forward to complete one character when limit is smaller than it).
// eof says no bytes will ever follow b.
func safeCut(b []byte, limit int, eof bool) int {
	n := min(len(b), max(limit, 1))
	for i := n - 1; i >= 0 && n-i <= utf8.UTFMax; i-- {
		if !utf8.RuneStart(b[i]) {
			continue
		}
		if utf8.FullRune(b[i:n]) {
			return n // complete, or invalid in a way more bytes cannot fix
		}
		// b[i:n] is the start of a longer character.
		switch {
		case i > 0 && (n < len(b) || !eof):
			return i // hold it back for the next read
		case n < len(b) && utf8.FullRune(b):
			_, size := utf8.DecodeRune(b)
			return size // limit is smaller than one character: return that one whole
		case !eof:
			return 0 // wait for the rest of the character
		}
		return len(b) // nothing more will come: return the fragment (replaced)
	}
	return n
}

func jobDir(stateDir, id string) string { return filepath.Join(stateDir, "jobs", id) }

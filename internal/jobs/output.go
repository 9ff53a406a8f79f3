package jobs

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pyexec/pyexec/internal/engine"
)

// foreignPollInterval is how often a long-poll re-reads the logs of a job
// run by another process sharing the state dir.
const foreignPollInterval = 100 * time.Millisecond

// DefaultChunkBytes is how much of each stream Output returns when
// Cursor.MaxBytes is unset.
const DefaultChunkBytes = 256 << 10

// MaxChunkBytes caps Cursor.MaxBytes: a reader asking for more gets this
// much and the offsets to continue from.
const MaxChunkBytes = 16 << 20

// Cursor says where a reader is in a job's output and how long to wait for
// more. Offsets are byte offsets into the stdout and stderr logs; pass back
// the offsets of the previous Chunk to get only what is new.
type Cursor struct {
	StdoutOffset int64
	StderrOffset int64
	// MaxBytes caps the bytes returned per stream (default
	// DefaultChunkBytes). A chunk may exceed it by less than one UTF-8
	// character, or stop up to 3 bytes short of it to avoid splitting one.
	MaxBytes int
	// Wait > 0 long-polls: when nothing is new yet, wait up to this long for
	// output or for the job to finish. The answer then holds whole lines:
	// it comes at a line end, or about 50 ms after the first new byte when
	// no line ends (a prompt, a progress bar), not after a single byte.
	Wait time.Duration
}

// Chunk is a piece of a job's output.
type Chunk struct {
	JobID  string `json:"job_id" jsonschema:"The job the output belongs to."`
	Status Status `json:"status" jsonschema:"Status of the job when the chunk was read."`
	Stdout string `json:"stdout" jsonschema:"Standard output after stdout_offset (UTF-8; invalid bytes replaced)."`
	Stderr string `json:"stderr" jsonschema:"Standard error after stderr_offset (UTF-8; invalid bytes replaced)."`
	// Next offsets: pass them back to continue.
	StdoutOffset int64 `json:"next_stdout_offset" jsonschema:"Byte offset to pass as stdout_offset next time."`
	StderrOffset int64 `json:"next_stderr_offset" jsonschema:"Byte offset to pass as stderr_offset next time."`
	// Sizes of the logs so far; a reader is caught up when its offsets equal them.
	StdoutSize int64 `json:"stdout_size" jsonschema:"Bytes in the stdout log so far."`
	StderrSize int64 `json:"stderr_size" jsonschema:"Bytes in the stderr log so far."`
	// Done is true when the job has finished and both offsets are at the end:
	// there will never be more output.
	Done bool `json:"done" jsonschema:"True when the job has finished and all output has been read."`
}

// outputState is a consistent view of a job's logs for one read.
type outputState struct {
	status         Status
	final          bool // no more bytes will be appended
	stdout, stderr logState
	changed        <-chan struct{} // nil for finished jobs
	// Shared stores: how often to re-read without a wakeup, and the reader
	// of the flushed output (nil: the local log files).
	poll time.Duration
	read func(s engine.Stream, off, end int64, max int, final bool) (string, int64, error)
}

func (m *Manager) outputState(ctx context.Context, id string) (outputState, error) {
	if lj := m.lookup(id); lj != nil {
		lj.settle(ctx)
		return lj.outputState(), nil
	}
	if m.sh != nil {
		if r, ok := m.sh.recentJob(id); ok {
			return r.outputState(), nil
		}
		return m.sh.outputState(ctx, id)
	}
	j, err := m.store.get(ctx, id)
	if err != nil {
		return outputState{}, err
	}
	// Not ours: finished, or run by another process sharing the state dir
	// (then its logs may still grow and we cannot be woken: Output polls).
	dir := jobDir(m.cfg.StateDir, id)
	st := outputState{status: j.Status, final: j.Status.Terminal()}
	if st.stdout, err = statLog(filepath.Join(dir, stdoutLogName), m.cfg.LogCap); err != nil {
		return outputState{}, fmt.Errorf("job %s stdout: %w", id, err)
	}
	if st.stderr, err = statLog(filepath.Join(dir, stderrLogName), m.cfg.LogCap); err != nil {
		return outputState{}, fmt.Errorf("job %s stderr: %w", id, err)
	}
	return st, nil
}

// outputState is the job's output as this process has it (its logs).
func (lj *liveJob) outputState() outputState {
	lj.mu.Lock()
	defer lj.mu.Unlock()
	st := outputState{status: lj.job.Status, final: lj.job.Status.Terminal(), changed: lj.changed}
	if lj.stdout != nil {
		st.stdout = lj.stdout.state()
	}
	if lj.stderr != nil {
		st.stderr = lj.stderr.state()
	}
	return st
}

// Output returns the job's output after the cursor's offsets, and the
// offsets to continue from. Consecutive calls that pass back the returned
// offsets never see a byte twice. With Wait > 0 and nothing new, it blocks
// until output is appended, the job ends, Wait elapses or ctx is done; it is
// woken by the writer (no polling).
func (m *Manager) Output(ctx context.Context, id string, c Cursor) (Chunk, error) {
	switch {
	case c.StdoutOffset < 0:
		return Chunk{}, &engine.RequestError{Field: "stdout_offset", Message: fmt.Sprintf("must be >= 0, got %d", c.StdoutOffset)}
	case c.StderrOffset < 0:
		return Chunk{}, &engine.RequestError{Field: "stderr_offset", Message: fmt.Sprintf("must be >= 0, got %d", c.StderrOffset)}
	case c.MaxBytes < 0:
		return Chunk{}, &engine.RequestError{Field: "max_bytes", Message: fmt.Sprintf("must be >= 0, got %d", c.MaxBytes)}
	case c.MaxBytes == 0:
		c.MaxBytes = DefaultChunkBytes
	}
	c.MaxBytes = min(c.MaxBytes, MaxChunkBytes)
	var timer *time.Timer
	if c.Wait > 0 {
		timer = time.NewTimer(c.Wait)
		defer timer.Stop()
	}
	dir := jobDir(m.cfg.StateDir, id)
	var settle <-chan time.Time // set once part of a line has come
	settled := false            // and fired
	for {
		st, err := m.outputState(ctx, id)
		if err != nil {
			return Chunk{}, err
		}
		ch := Chunk{JobID: id, Status: st.status, StdoutSize: st.stdout.size, StderrSize: st.stderr.size}
		read := st.read
		if read == nil {
			// Local logs: an offset past what is written is the caller's
			// mistake, named as such (not a read error).
			if c.StdoutOffset > st.stdout.size {
				return Chunk{}, &engine.RequestError{Field: "stdout_offset", Message: fmt.Sprintf("%d is past the end of the job's stdout (%d bytes so far); pass back a next_stdout_offset", c.StdoutOffset, st.stdout.size)}
			}
			if c.StderrOffset > st.stderr.size {
				return Chunk{}, &engine.RequestError{Field: "stderr_offset", Message: fmt.Sprintf("%d is past the end of the job's stderr (%d bytes so far); pass back a next_stderr_offset", c.StderrOffset, st.stderr.size)}
			}
			read = func(s engine.Stream, off, end int64, max int, final bool) (string, int64, error) {
				name := stdoutLogName
				if s == engine.Stderr {
					name = stderrLogName
				}
				return readLog(filepath.Join(dir, name), off, end, max, final)
			}
		}
		ch.Stdout, ch.StdoutOffset, err = read(engine.Stdout, c.StdoutOffset, st.stdout.size, c.MaxBytes, st.final)
		if err != nil {
			return Chunk{}, fmt.Errorf("job %s stdout: %w", id, err)
		}
		ch.Stderr, ch.StderrOffset, err = read(engine.Stderr, c.StderrOffset, st.stderr.size, c.MaxBytes, st.final)
		if err != nil {
			return Chunk{}, fmt.Errorf("job %s stderr: %w", id, err)
		}
		ch.Done = st.final && ch.StdoutOffset >= st.stdout.size && ch.StderrOffset >= st.stderr.size
		progressed := ch.StdoutOffset != c.StdoutOffset || ch.StderrOffset != c.StderrOffset
		if progressed && timer != nil && !st.final {
			// A long-poll answers with whole lines: what ends mid-line is
			// cut at its last newline, or, with no newline yet, waited on
			// for up to lineSettle after the first new byte.
			if wholeLines(&ch, c) {
				return ch, nil
			}
			if settle == nil {
				t := time.NewTimer(lineSettle)
				defer t.Stop()
				settle = t.C
			}
			if settled {
				return ch, nil
			}
		} else if progressed || st.final || timer == nil {
			return ch, nil
		}
		var poll <-chan time.Time
		switch {
		case st.poll > 0:
			poll = time.After(st.poll)
		case st.changed == nil: // another process's job: no in-process wakeup exists
			poll = time.After(foreignPollInterval)
		}
		if m.onWait != nil {
			m.onWait()
		}
		select {
		case <-st.changed:
		case <-poll:
		case <-settle:
			settled = true
		case <-timer.C:
			return ch, nil
		case <-ctx.Done():
			return ch, ctx.Err()
		}
	}
}

// lineSettle is how long a long-poll that got part of a line waits for
// the rest of it.
const lineSettle = 50 * time.Millisecond

// wholeLines reports whether every stream ch advanced ends at a line end,
// cutting one that has a newline after its last one (it is read again next
// time). A stream that filled its MaxBytes, or whose text had invalid
// bytes replaced (offsets would no longer match lengths), counts as whole.
func wholeLines(ch *Chunk, c Cursor) bool {
	whole := true
	for _, s := range []struct {
		text *string
		off  *int64
		from int64
	}{{&ch.Stdout, &ch.StdoutOffset, c.StdoutOffset}, {&ch.Stderr, &ch.StderrOffset, c.StderrOffset}} {
		t := *s.text
		if t == "" || strings.HasSuffix(t, "\n") || len(t) >= c.MaxBytes-utf8.UTFMax || strings.ContainsRune(t, utf8.RuneError) {
			continue
		}
		if i := strings.LastIndexByte(t, '\n'); i >= 0 {
			*s.text = t[:i+1]
			*s.off = s.from + int64(i+1)
			continue
		}
		whole = false
	}
	return whole
}

package jobs

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"
)

// ProgressFDEnv names the environment variable that tells a script which
// inherited file descriptor to write progress lines to.
//
// Why a descriptor rather than a file path: it needs no path the sandbox
// must allow, no FIFO lifecycle, no polling of a file, and it cannot be
// confused with another run's progress. The engine passes
// RunOptions.ProgressPipe in exec.Cmd.ExtraFiles and sets this variable.
const ProgressFDEnv = "PYEXEC_PROGRESS_FD"

// ProgressInodeEnv carries the inode of the progress pipe; the helper
// writes only when the descriptor is that pipe.
const ProgressInodeEnv = "PYEXEC_PROGRESS_INODE"

// HelperModule is the name of the importable helper (pyexec_progress.py).
const HelperModule = "pyexec_progress"

//go:embed pyexec_progress.py
var helperSource []byte

// maxProgressLine bounds one progress line; longer lines are skipped.
const maxProgressLine = 64 << 10

// maxProgressMessage bounds the stored message.
const maxProgressMessage = 1000

// writeHelper installs pyexec_progress.py in dir (atomically, and only when
// its content changed, so concurrent runs never import a half-written file).
func writeHelper(dir string) error {
	path := filepath.Join(dir, HelperModule+".py")
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, helperSource) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install progress helper: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".pyexec_progress-*.tmp")
	if err != nil {
		return fmt.Errorf("install progress helper: %w", err)
	}
	_, werr := tmp.Write(helperSource)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("install progress helper: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("install progress helper: %w", err)
	}
	return nil
}

// ParseProgress decodes one progress line: a JSON object with a numeric
// "current" and optional numeric "total" and string "message" (null counts
// as absent). Unknown fields are ignored.
func ParseProgress(line []byte) (Progress, error) {
	var raw struct {
		Current *float64 `json:"current"`
		Total   *float64 `json:"total"`
		Message *string  `json:"message"`
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Progress{}, errors.New("empty progress line")
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return Progress{}, fmt.Errorf("progress line is not a JSON object like {\"current\":5,\"total\":10,\"message\":\"...\"}: %w", err)
	}
	if raw.Current == nil {
		return Progress{}, errors.New(`progress line has no numeric "current"`)
	}
	p := Progress{Current: *raw.Current, UpdatedAt: time.Now().UTC()}
	if raw.Total != nil {
		if *raw.Total < 0 {
			return Progress{}, fmt.Errorf(`progress "total" must be >= 0, got %v`, *raw.Total)
		}
		p.Total = *raw.Total
	}
	if math.IsInf(p.Current, 0) || math.IsNaN(p.Current) {
		return Progress{}, errors.New(`progress "current" must be finite`)
	}
	if raw.Message != nil {
		p.Message = truncateRunes(*raw.Message, maxProgressMessage)
	}
	return p, nil
}

func truncateRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// readProgress parses progress lines from r until EOF or a read error,
// calling fn for each valid one. Invalid and over-long lines are skipped: a
// script's bad report must never hurt its job.
func readProgress(r io.Reader, fn func(Progress)) error {
	br := bufio.NewReaderSize(r, 4096)
	var long bool // inside a line longer than maxProgressLine
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(frag) > 0 && !long {
			buf = append(buf, frag...)
			if len(buf) > maxProgressLine {
				long, buf = true, buf[:0]
			}
		}
		switch {
		case err == nil: // a full line
			if !long {
				if p, perr := ParseProgress(buf); perr == nil {
					fn(p)
				}
			}
			long, buf = false, buf[:0]
		case errors.Is(err, bufio.ErrBufferFull):
			// keep accumulating
		case errors.Is(err, io.EOF):
			if !long && len(bytes.TrimSpace(buf)) > 0 {
				if p, perr := ParseProgress(buf); perr == nil {
					fn(p)
				}
			}
			return nil
		default:
			return err
		}
	}
}

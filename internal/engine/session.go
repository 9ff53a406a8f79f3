package engine

import (
	"errors"
	"sync"
)

// CellError is an exception that ended a cell (not the session).
type CellError struct {
	Ename     string `json:"ename" jsonschema:"Exception class name, like NameError."`
	Evalue    string `json:"evalue" jsonschema:"The exception's message."`
	Traceback string `json:"traceback" jsonschema:"The formatted traceback; frames of the cell are named <cell N>."`
}

// CellResult is what one cell produced. It is shaped like Result (stdout,
// stderr, byte counts, truncation) so that the same presentation applies.
type CellResult struct {
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`

	// Result is the repr of the cell's last expression (nil: none, or None).
	Result      *string    `json:"result,omitempty"`
	Error       *CellError `json:"error,omitempty"`
	Interrupted bool       `json:"interrupted"`
	TimedOut    bool       `json:"timed_out"`
	// Exited is set when the cell called sys.exit(): the session is over.
	Exited         *int    `json:"exited,omitempty"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`

	// Display is what the cell displayed, in order: display() and
	// IPython.display, plt.show(), the last expression's value in rich
	// form (source "result", when it has more than its repr) and the
	// figures still open at its end (then closed), as MIME bundles.
	Display []Display `json:"display,omitempty"`
	// Files are the workspace files the cell created or changed.
	Files       []FileChange `json:"files,omitempty"`
	FilesNote   string       `json:"files_note,omitempty"`
	OutputNotes []string     `json:"output_notes,omitempty"`
	// Sandbox is the session's confinement, as Result.Sandbox says it.
	Sandbox string `json:"sandbox,omitempty"`
	// LimitExceeded names the resource limit the cell's exception comes
	// from (file_size, processes, memory), as Result.LimitExceeded.
	LimitExceeded string `json:"limit_exceeded,omitempty"`
}

// ErrSessionEnded says the session's interpreter is gone; SessionProcess.End
// says why.
var ErrSessionEnded = errors.New("the session's interpreter has ended")

// sessionSet is the engine's live session interpreters, so that Close ends
// them: a session never outlives its engine.
type sessionSet struct {
	mu   sync.Mutex
	live map[*SessionProcess]struct{}
}

func (s *sessionSet) add(p *SessionProcess) {
	s.mu.Lock()
	if s.live == nil {
		s.live = map[*SessionProcess]struct{}{}
	}
	s.live[p] = struct{}{}
	s.mu.Unlock()
}

func (s *sessionSet) remove(p *SessionProcess) {
	s.mu.Lock()
	delete(s.live, p)
	s.mu.Unlock()
}

// killAll ends every live session and waits until each is gone.
func (s *sessionSet) killAll() {
	s.mu.Lock()
	var all []*SessionProcess
	for p := range s.live {
		all = append(all, p)
	}
	s.mu.Unlock()
	for _, p := range all {
		p.Kill("server_shutdown")
	}
	for _, p := range all {
		<-p.Done()
	}
}

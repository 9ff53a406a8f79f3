package uvenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrNoUV is wrapped by every error caused by uv being absent. Runs without
// dependencies never need uv, so callers can check errors.Is(err, ErrNoUV)
// and keep serving them.
var ErrNoUV = errors.New(`uv is not installed: install it with "pip install uv"`)

// FindUV locates a real uv binary. PATH entries that are version-manager shim
// directories (pyenv, asdf) are tried last: a pyenv shim is a shell script
// that costs 100+ ms and fails outright when the active version lacks uv. If
// PATH only has a shim, the real binary under $PYENV_ROOT/versions/*/bin is
// preferred. It returns an error wrapping ErrNoUV when nothing is found.
func FindUV(environ []string) (string, error) {
	get := func(name string) string {
		for i := len(environ) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
				return v
			}
		}
		return ""
	}
	var shims []string
	for _, dir := range filepath.SplitList(get("PATH")) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "uv")
		if !isExecutable(p) {
			continue
		}
		if filepath.Base(dir) == "shims" {
			shims = append(shims, p)
			continue
		}
		return p, nil
	}
	root := get("PYENV_ROOT")
	if root == "" && get("HOME") != "" {
		root = filepath.Join(get("HOME"), ".pyenv")
	}
	if root != "" {
		matches, _ := filepath.Glob(filepath.Join(root, "versions", "*", "bin", "uv"))
		sort.Sort(sort.Reverse(sort.StringSlice(matches))) // lexical, good enough to be deterministic
		for _, m := range matches {
			if isExecutable(m) {
				return m, nil
			}
		}
	}
	if len(shims) > 0 {
		return shims[0], nil
	}
	return "", fmt.Errorf("find uv on PATH: %w", ErrNoUV)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Phases a build reports through a Progress callback, in order. Detail
// carries uv's own line ("Resolved 3 packages in 2ms") where there is one.
const (
	PhaseCreating    = "creating"    // making the virtual environment
	PhaseResolving   = "resolving"   // uv is resolving requirements
	PhaseDownloading = "downloading" // fetching / building distributions
	PhaseInstalling  = "installing"  // linking files into the env, compiling bytecode
	PhaseDone        = "done"        // the env is ready (detail: what was installed)
)

// Progress receives build phases as uv reports them. It is called from the
// goroutine reading uv's stderr and must not block for long.
type Progress func(phase, detail string)

// phaseOf maps one line of uv's stderr to the phase it announces, or "".
func phaseOf(line string) string {
	t := strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(t, "Using ") && strings.Contains(t, "interpreter"),
		strings.HasPrefix(t, "Creating virtual environment"):
		return PhaseCreating
	case strings.HasPrefix(t, "Resolved "), strings.HasPrefix(t, "Downloading "),
		strings.HasPrefix(t, "Downloaded "), strings.HasPrefix(t, "Building "),
		strings.HasPrefix(t, "Built "):
		return PhaseDownloading
	case strings.HasPrefix(t, "Prepared "), strings.HasPrefix(t, "Installed "),
		strings.HasPrefix(t, "Uninstalled "), strings.HasPrefix(t, "Audited "),
		strings.HasPrefix(t, "Bytecode compiled "), strings.HasPrefix(t, "+ "):
		return PhaseInstalling
	}
	return ""
}

// uvRunner runs uv subcommands with one environment and reports progress.
type uvRunner struct {
	path    string
	environ []string
}

// stderrKeep bounds how much of uv's stderr is kept for error messages: the
// explanation ("No solution found ...") is at the end, so the tail is kept.
const stderrKeep = 64 << 10

// run executes uv with args in dir, as the server: only for what runs no
// package code (creating a venv, installing wheels with --no-build, listing
// an env the server built). stdout is returned; stderr lines are passed to
// progress as they arrive and, on failure, the error carries uv's stderr
// (its own explanation of what went wrong). uv gets its own process group,
// and the whole group is killed when ctx ends: uv does not forward SIGKILL
// to its children.
func (u uvRunner) run(ctx context.Context, dir string, extraEnv []string, progress Progress, args ...string) ([]byte, error) {
	if err := u.check(args); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, u.path, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), u.environ...), extraEnv...)
	killTreeOnCancel(cmd)
	cmd.WaitDelay = 5 * time.Second
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	lines := newLineWriter(progress)
	cmd.Stderr = lines
	if err := cmd.Start(); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("run uv %s: %w", args[0], ErrNoUV)
		}
		return nil, fmt.Errorf("run uv %s: %w", args[0], err)
	}
	err := cmd.Wait()
	lines.flush()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("uv %s: %w", args[0], ctx.Err())
	}
	if err != nil {
		return nil, lines.failure(args, err)
	}
	return stdout.Bytes(), nil
}

// runConfined is run through confine: for every uv command of a build that
// can execute package code. c says what it may read and write; its Argv,
// Stdout and Stderr are filled in here.
func (u uvRunner) runConfined(ctx context.Context, confine Confiner, c Command, progress Progress, args ...string) ([]byte, error) {
	if err := u.check(args); err != nil {
		return nil, err
	}
	var stdout bytes.Buffer
	lines := newLineWriter(progress)
	c.Argv = append([]string{u.path}, args...)
	c.Stdout, c.Stderr = &stdout, lines
	code, err := confine(ctx, c)
	lines.flush()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("uv %s: %w", args[0], ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("uv %s (confined): %w", args[0], err)
	}
	if code != 0 {
		return nil, lines.failure(args, fmt.Errorf("exit status %d", code))
	}
	return stdout.Bytes(), nil
}

func (u uvRunner) check(args []string) error {
	if u.path == "" {
		return fmt.Errorf("run uv %s: %w", args[0], ErrNoUV)
	}
	if _, err := os.Stat(u.path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("run uv %s: %s does not exist: %w", args[0], u.path, ErrNoUV)
	}
	return nil
}

// lineWriter takes uv's stderr: each line goes to progress (as the phase it
// announces) and the tail is kept for the error message.
type lineWriter struct {
	mu       sync.Mutex
	progress Progress
	partial  []byte
	tail     tailBuffer
}

func newLineWriter(progress Progress) *lineWriter {
	return &lineWriter{progress: progress, tail: tailBuffer{max: stderrKeep}}
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tail.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 1<<20 {
		l.partial = l.partial[:0] // an over-long line: not a phase anyway
	}
	return len(p), nil
}

func (l *lineWriter) line(s string) {
	if l.progress != nil {
		if phase := phaseOf(s); phase != "" {
			l.progress(phase, strings.TrimSpace(s))
		}
	}
}

func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.line(string(l.partial))
		l.partial = nil
	}
}

func (l *lineWriter) failure(args []string, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := strings.TrimSpace(l.tail.String())
	if msg == "" {
		msg = "(no output)"
	}
	return &UVError{Args: args, Err: err, Stderr: msg}
}

// UVError is a failed uv command. Its message is uv's own stderr, which says
// precisely what went wrong (for an unresolvable requirement it is the "No
// solution found when resolving dependencies" explanation).
type UVError struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *UVError) Error() string {
	var lines []string
	for _, l := range strings.Split(e.Stderr, "\n") {
		// "Using Python 3.11.7 environment at: ..." names our temp dir: noise.
		if !strings.HasPrefix(l, "Using ") {
			lines = append(lines, l)
		}
	}
	msg := strings.TrimSpace(strings.Join(lines, "\n"))
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("uv %s failed:\n%s", strings.TrimSpace(e.Args[0]+" "+firstArg(e.Args[1:])), msg)
}

func (e *UVError) Unwrap() error { return e.Err }

func firstArg(a []string) string {
	if len(a) == 0 || strings.HasPrefix(a[0], "-") {
		return ""
	}
	return a[0]
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }

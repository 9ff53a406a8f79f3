package executor

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/pyexec/pyexec/internal/engine"
)

// profileWrapper runs a script under cProfile and reports the top functions
// on stderr between two marker lines (see the file for why stderr).
//
//go:embed profile_wrapper.py
var profileWrapper string

// Profiler is an Executor that can run a request once under cProfile on
// the executing side (the wrapper is server code: a remote executor's
// server profiles, the front end cannot). run_script_profile and
// benchmark_python's profile use it.
type Profiler interface {
	Profile(ctx context.Context, req ProfileRequest, progress ProgressFunc) (ProfileResult, error)
}

// ProfileRequest is one run to profile.
type ProfileRequest struct {
	engine.Request
	Rows int `json:"profile_rows,omitempty" jsonschema:"Rows in the profile table (default 25, at most 200)."`
}

// ProfileResult is the profiled run's result (its stderr without the
// profile block) and the table.
type ProfileResult struct {
	engine.Result
	Profile     []ProfileRow `json:"profile" jsonschema:"The top functions by cumulative time (cProfile, main thread only)."`
	ProfileNote string       `json:"profile_note,omitempty" jsonschema:"What limits the table, or why it is missing."`
}

var _ Profiler = (*Local)(nil)

// Profile implements Profiler.
func (l *Local) Profile(ctx context.Context, req ProfileRequest, progress ProgressFunc) (ProfileResult, error) {
	rows := req.Rows
	switch {
	case rows < 0 || rows > MaxProfileRows:
		return ProfileResult{}, &engine.RequestError{Field: "profile_rows", Message: fmt.Sprintf("must be between 1 and %d, got %d", MaxProfileRows, rows)}
	case rows == 0:
		rows = DefaultProfileRows
	}
	if len(req.Preamble) > 0 {
		return ProfileResult{}, &engine.RequestError{Field: "preamble", Message: "a profile cannot wrap a request that already has a preamble"}
	}
	wrapper, err := l.eng.CodeFile(profileWrapper)
	if err != nil {
		return ProfileResult{}, fmt.Errorf("profile wrapper: %w", err)
	}
	nonce := make([]byte, 12)
	if _, err := rand.Read(nonce); err != nil {
		return ProfileResult{}, fmt.Errorf("profile marker: %w", err)
	}
	marker := "@@pyexec-profile-" + hex.EncodeToString(nonce) + "@@"
	r := req.Request
	r.Preamble = []string{wrapper, marker, strconv.Itoa(rows)}
	res, err := l.Run(ctx, r, progress)
	if err != nil {
		return ProfileResult{}, err
	}
	out := ProfileResult{Result: res, Profile: []ProfileRow{}}
	table, rest, ok := cutProfile(res.Stderr, marker)
	if !ok {
		out.ProfileNote = fmt.Sprintf("the profiled run ended without a profile (exit code %d, timed out: %t); stderr tail: %s",
			res.ExitCode, res.TimedOut, tail(res.Stderr, 300))
		return out, nil
	}
	out.Stderr = rest
	if err := json.Unmarshal([]byte(table), &out.Profile); err != nil {
		out.ProfileNote = fmt.Sprintf("the profile could not be read: %v", err)
		return out, nil
	}
	out.ProfileNote = "from one run under cProfile (main thread only; profiling slows code, so its times are not comparable to unprofiled runs)"
	if !res.Success {
		out.ProfileNote += fmt.Sprintf("; the profiled run exited with code %d", res.ExitCode)
	}
	return out, nil
}

// profile runs req once under cProfile for a benchmark and returns the top
// rows by cumulative time. The wrapper is a script file in the engine's code
// directory put in front through the engine's Preamble
// (python -u WRAPPER MARKER ROWS FILE ARGS...), so the script still runs as a
// file with its own args, cwd, interpreter and environment. A missing table
// is not an error: the note says why.
func profile(ctx context.Context, ex Executor, req engine.Request, rows int, progress ProgressFunc) ([]ProfileRow, string, error) {
	p, ok := ex.(Profiler)
	if !ok {
		return nil, "not profiled: this executor cannot profile (an execution server older than this front end?)", nil
	}
	res, err := p.Profile(ctx, ProfileRequest{Request: req, Rows: rows}, progress)
	if err != nil {
		return nil, "", err
	}
	if len(res.Profile) == 0 && res.ProfileNote != "" && !strings.HasPrefix(res.ProfileNote, "from one run") {
		return nil, res.ProfileNote, nil
	}
	note := strings.Replace(res.ProfileNote, "from one run under cProfile", "from one extra run under cProfile", 1)
	note = strings.Replace(note, "unprofiled runs", "the measured runs", 1)
	return res.Profile, note, nil
}

// cutProfile finds the JSON between the two marker lines and returns it
// with the stderr around it.
func cutProfile(stderr, marker string) (table, rest string, ok bool) {
	open := "\n" + marker + "\n"
	// The marker holds a random nonce, so the script cannot have printed it.
	i := strings.Index(stderr, open)
	if i < 0 {
		return "", stderr, false
	}
	body := stderr[i+len(open):]
	j := strings.Index(body, "\n"+marker)
	if j < 0 {
		return "", stderr, false
	}
	after := strings.TrimPrefix(body[j+1+len(marker):], "\n")
	return body[:j], stderr[:i] + after, true
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "…" + strings.ToValidUTF8(s[len(s)-n:], "")
}

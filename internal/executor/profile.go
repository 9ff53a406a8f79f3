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

// profile runs req once under cProfile and returns the top rows by
// cumulative time. The wrapper is a script file in the engine's code
// directory put in front through the engine's Preamble
// (python -u WRAPPER MARKER ROWS FILE ARGS...), so the script still runs as a
// file with its own args, cwd, interpreter and environment. A missing table
// is not an error: the note says why.
func profile(ctx context.Context, ex Executor, req engine.Request, rows int, progress ProgressFunc) ([]ProfileRow, string, error) {
	local, ok := ex.(interface{ Engine() *engine.Engine })
	if !ok {
		// The preamble is not part of the wire format: a remote executor
		// would run the script unprofiled. Its server profiles instead.
		return nil, "not profiled: profiling needs the in-process executor (call the execution server's benchmark)", nil
	}
	wrapper, err := local.Engine().CodeFile(profileWrapper)
	if err != nil {
		return nil, "", fmt.Errorf("profile wrapper: %w", err)
	}
	nonce := make([]byte, 12)
	if _, err := rand.Read(nonce); err != nil {
		return nil, "", fmt.Errorf("profile marker: %w", err)
	}
	marker := "@@pyexec-profile-" + hex.EncodeToString(nonce) + "@@"
	req.Preamble = []string{wrapper, marker, strconv.Itoa(rows)}
	res, err := ex.Run(ctx, req, progress)
	if err != nil {
		return nil, "", err
	}
	table, ok := cutProfile(res.Stderr, marker)
	if !ok {
		return nil, fmt.Sprintf("the profiled run ended without a profile (exit code %d, timed out: %t); stderr tail: %s",
			res.ExitCode, res.TimedOut, tail(res.Stderr, 300)), nil
	}
	var out []ProfileRow
	if err := json.Unmarshal([]byte(table), &out); err != nil {
		return nil, fmt.Sprintf("the profile could not be read: %v", err), nil
	}
	note := "from one extra run under cProfile (main thread only; profiling slows code, so its times are not comparable to the measured runs)"
	if !res.Success {
		note += fmt.Sprintf("; the profiled run exited with code %d", res.ExitCode)
	}
	return out, note, nil
}

// cutProfile finds the JSON between the two marker lines.
func cutProfile(stderr, marker string) (string, bool) {
	open := "\n" + marker + "\n"
	// The marker holds a random nonce, so the script cannot have printed it.
	i := strings.Index(stderr, open)
	if i < 0 {
		return "", false
	}
	body := stderr[i+len(open):]
	j := strings.Index(body, "\n"+marker)
	if j < 0 {
		return "", false
	}
	return body[:j], true
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "…" + strings.ToValidUTF8(s[len(s)-n:], "")
}

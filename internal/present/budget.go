// Package present decides what a result looks like to a model: how much of
// its output fits the model's budget and where it is cut, what the marker
// says and where the rest is, which images go inline, how displayed
// objects and DataFrames read, and which hint follows an error. It decides
// once; the MCP server and the REST API only encode what it returns.
package present

import (
	"fmt"
	"unicode/utf8"
)

// DefaultBudget is the characters a result carries by default (about
// 5,000 tokens: clients refuse results over 25,000 tokens by default).
const DefaultBudget = 20000

// MinBudget is the smallest budget a call may ask for.
const MinBudget = 1000

// Image bounds: what a model's image input takes without resampling.
const (
	MaxInlineImages = 8
	MaxImageBytes   = 1 << 20
	MaxImageEdge    = 1568
)

// Budget resolves a call's max_output_chars against the server's cap:
// 0 means the server's budget; a request may lower it, or raise it up to
// the cap.
func Budget(requested, serverDefault, serverCap int) (int, error) {
	if serverDefault <= 0 {
		serverDefault = DefaultBudget
	}
	if serverCap <= 0 {
		serverCap = serverDefault
	}
	switch {
	case requested == 0:
		return min(serverDefault, serverCap), nil
	case requested < MinBudget:
		return 0, fmt.Errorf("max_output_chars: %d is below the minimum of %d", requested, MinBudget)
	case requested > serverCap:
		return 0, fmt.Errorf("max_output_chars: %d is above this server's cap of %d (--max-result-chars)", requested, serverCap)
	}
	return requested, nil
}

// share splits total among needs by water-filling: nobody gets more than
// it needs, and what one does not need goes to the others.
func share(needs []int, total int) []int {
	out := make([]int, len(needs))
	left, open := total, 0
	for _, n := range needs {
		if n > 0 {
			open++
		}
	}
	for open > 0 && left > 0 {
		each := max(left/open, 1)
		progressed := false
		for i, n := range needs {
			if out[i] >= n {
				continue
			}
			give := min(each, n-out[i], left)
			out[i] += give
			left -= give
			progressed = progressed || give > 0
			if out[i] >= n {
				open--
			}
			if left == 0 {
				break
			}
		}
		if !progressed {
			break
		}
	}
	return out
}

// MustKeep reports whether a finished run's full output has to be kept
// (as a job) to be readable after a result of this budget: its streams
// will be cut, or not all its images go inline.
func MustKeep(stdoutBytes, stderrBytes int64, images int, largest int, budget int) bool {
	if budget <= 0 {
		budget = DefaultBudget
	}
	return stdoutBytes+stderrBytes > int64(streamBudget(budget)) || images > MaxInlineImages || largest > MaxImageBytes
}

// streamBudget is the part of a budget the two streams share (the rest
// is the result's fixed text and displays).
func streamBudget(budget int) int { return budget * 8 / 10 }

// runeStart moves i back to the start of a UTF-8 character.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

package present

import (
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/engine"
)

// BatchEntry is one entry of a batch: a run, or why it was rejected.
type BatchEntry struct {
	Result   engine.Result
	Where    Where
	Code     string
	Rejected string
}

// Batch presents a batch within one budget shared by its entries: each
// gets what it needs, and what a quiet entry does not use goes to the
// others.
func Batch(entries []BatchEntry, budget int) (string, []View) {
	if budget <= 0 {
		budget = DefaultBudget
	}
	needs := make([]int, len(entries))
	ok := 0
	for i, e := range entries {
		if e.Rejected == "" {
			needs[i] = len(e.Result.Stdout) + len(e.Result.Stderr) + 400
			for _, d := range e.Result.Display {
				needs[i] += len(bestText(d))
			}
			if e.Result.Success {
				ok++
			}
		}
	}
	shares := share(needs, budget)
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d snippets succeeded.\n\n", ok, len(entries))
	views := make([]View, len(entries))
	for i, e := range entries {
		if e.Rejected != "" {
			fmt.Fprintf(&b, "### Snippet %d\n**rejected**: %s\n\n", i, e.Rejected)
			continue
		}
		views[i] = Run(RunInput{Result: e.Result, Where: e.Where, Code: e.Code, Heading: fmt.Sprintf("Snippet %d", i), Budget: max(shares[i], 500)})
		b.WriteString(views[i].Markdown)
		b.WriteByte('\n')
	}
	return b.String(), views
}

// BatchBudgetShare is what Batch can promise each of n entries at least,
// for deciding up front which entries' output to keep.
func BatchBudgetShare(budget, n int) int {
	if budget <= 0 {
		budget = DefaultBudget
	}
	return max(budget/max(n, 1), 500)
}

// Package batchplan is the py-executor seed's batch helpers (chunk_by_count,
// chunk_by_size, suggest_batch_size) as pure functions, so an agent can ask
// the server how to split work before calling run_python_batch.
package batchplan

import (
	"fmt"
	"strings"
)

// Complexity is how heavy each item's work is.
type Complexity string

const (
	Low    Complexity = "low"
	Medium Complexity = "medium"
	High   Complexity = "high"
)

// baseWorkers is the seed's table: heavier work, fewer parallel workers.
var baseWorkers = map[Complexity]int{Low: 4, Medium: 3, High: 2}

// PlanRequest is what plan_batch takes.
type PlanRequest struct {
	Items      []any      `json:"items" jsonschema:"The work items to split (file names, ids, any JSON values). May be empty."`
	Complexity Complexity `json:"complexity,omitempty" jsonschema:"How heavy each item is: low (e.g. file size checks), medium (parsing; the default) or high (e.g. ML inference). Heavier work gets fewer workers."`
	MaxWorkers int        `json:"max_workers,omitempty" jsonschema:"Upper bound on workers (default: no bound beyond the server's)."`
}

// Plan is the suggested split.
type Plan struct {
	Workers    int     `json:"workers" jsonschema:"Suggested parallel workers: pass it as max_workers to run_python_batch. 0 when there are no items."`
	Chunks     [][]any `json:"chunks" jsonschema:"The items split into one contiguous chunk per worker, sizes differing by at most one, input order kept."`
	ChunkSizes []int   `json:"chunk_sizes" jsonschema:"Number of items in each chunk."`
	TotalItems int     `json:"total_items" jsonschema:"Number of items given."`
	Reason     string  `json:"reason" jsonschema:"How the worker count was chosen."`
}

// PlanBatch suggests a worker count (the complexity's base, bounded by
// max_workers, the server's worker cap and the number of items) and splits
// the items into that many chunks. serverMax <= 0 means no server cap.
func PlanBatch(req PlanRequest, serverMax int) (Plan, error) {
	c := req.Complexity
	if c == "" {
		c = Medium
	}
	base, ok := baseWorkers[c]
	if !ok {
		return Plan{}, fmt.Errorf("complexity: %q is not one of low, medium, high", req.Complexity)
	}
	if req.MaxWorkers < 0 {
		return Plan{}, fmt.Errorf("max_workers: must be positive, got %d", req.MaxWorkers)
	}
	n := len(req.Items)
	workers := base
	why := []string{fmt.Sprintf("%s complexity suggests %d", c, base)}
	if req.MaxWorkers > 0 && req.MaxWorkers < workers {
		workers = req.MaxWorkers
		why = append(why, fmt.Sprintf("max_workers caps it at %d", workers))
	}
	if serverMax > 0 && serverMax < workers {
		workers = serverMax
		why = append(why, fmt.Sprintf("the server runs at most %d at once", workers))
	}
	if n < workers {
		workers = n
		why = append(why, fmt.Sprintf("only %d items", n))
	}
	chunks := ChunkByCount(req.Items, workers)
	sizes := make([]int, len(chunks))
	for i, ch := range chunks {
		sizes[i] = len(ch)
	}
	return Plan{Workers: workers, Chunks: chunks, ChunkSizes: sizes, TotalItems: n, Reason: strings.Join(why, "; ")}, nil
}

// ChunkByCount splits items into n contiguous chunks whose sizes differ by
// at most one (earlier chunks take the remainder). n is clamped to
// [1, len(items)]; no items give no chunks (never empty chunks).
func ChunkByCount[T any](items []T, n int) [][]T {
	if len(items) == 0 {
		return [][]T{}
	}
	n = max(1, min(n, len(items)))
	out := make([][]T, 0, n)
	size, extra := len(items)/n, len(items)%n
	start := 0
	for i := range n {
		end := start + size
		if i < extra {
			end++
		}
		out = append(out, items[start:end:end])
		start = end
	}
	return out
}

package mcpserver

import (
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/batchplan"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
)

// TestRenderings: what a model reads for the results that used to say too
// little or the wrong thing first.
func TestRenderings(t *testing.T) {
	for _, tc := range []struct {
		name       string
		text       string
		want, not  []string
		wantPrefix string
	}{
		{
			name: "benchmark whose warm-up failed",
			text: renderBenchmark(executor.BenchmarkResult{Warmup: 1, Note: "the warm-up run failed (exit code 1): nothing was measured",
				Result: engine.Result{ExitCode: 1, Stderr: "Traceback ...\nZeroDivisionError\n", StderrBytes: 32}}),
			wantPrefix: "**benchmark failed** · no run was measured: the warm-up run failed",
			want:       []string{"ZeroDivisionError"},
			not:        []string{"| measure", "median:", "0 measured run"},
		},
		{
			name: "profile rows name inline code and workspace files",
			text: renderBenchmark(executor.BenchmarkResult{Runs: make([]executor.BenchmarkRun, 1), Profile: []executor.ProfileRow{
				{Function: "hot", File: "<code>", Line: 3}, {Function: "f", File: "sub/m.py", Line: 1}, {Function: "dumps", File: "/usr/lib/python3.11/json/__init__.py", Line: 183}}}),
			want: []string{"`<code>:3`", "`sub/m.py:1`", "`__init__.py:183`"},
		},
		{
			name: "chunk_code shows the pieces",
			text: renderChunks(batchplan.ChunkResult{Chunks: []string{"a = 1\n", "print(a)\n"}, ChunkBytes: []int{6, 9}}, 20000),
			want: []string{"piece 1 (6 bytes):\n```\na = 1\n```", "piece 2 (9 bytes):\n```\nprint(a)\n```"},
			not:  []string{"not shown"},
		},
		{
			name: "chunk_code over the budget says where the rest is",
			text: renderChunks(batchplan.ChunkResult{Chunks: []string{strings.Repeat("x", 300) + "\n", strings.Repeat("y", 300) + "\n"}, ChunkBytes: []int{301, 301}}, 400),
			want: []string{"piece 1", "Pieces 2-2 are not shown", "structured content (chunks)"},
			not:  []string{"yyyy"},
		},
		{
			name: "plan_batch shows the items of each chunk",
			text: renderPlan(batchplan.Plan{Workers: 2, TotalItems: 3, Reason: "medium", Chunks: [][]any{{"a.csv", "b.csv"}, {"c.csv"}}, ChunkSizes: []int{2, 1}}, 20000),
			want: []string{"**2 worker(s)**", "1. (2 items) `[\"a.csv\",\"b.csv\"]`", "2. (1 items) `[\"c.csv\"]`"},
		},
		{
			name: "plan_batch over the budget",
			text: renderPlan(batchplan.Plan{Workers: 2, TotalItems: 2, Reason: "medium", Chunks: [][]any{{strings.Repeat("a", 200)}, {strings.Repeat("b", 200)}}}, 350),
			want: []string{"Chunks 2-2 are not shown"},
			not:  []string{"bbbb"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.HasPrefix(tc.text, tc.wantPrefix) {
				t.Errorf("starts %q, want %q", tc.text[:min(len(tc.text), 80)], tc.wantPrefix)
			}
			for _, w := range tc.want {
				if !strings.Contains(tc.text, w) {
					t.Errorf("lacks %q:\n%s", w, tc.text)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(tc.text, n) {
					t.Errorf("has %q:\n%s", n, tc.text)
				}
			}
		})
	}
}

package batchplan

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func items(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("file%d.py", i+1)
	}
	return out
}

func TestPlanBatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		req        PlanRequest
		serverMax  int
		workers    int
		sizes      []int
		wantErrSub string
	}{
		{"zero items", PlanRequest{Items: nil, Complexity: Low}, 0, 0, []int{}, ""},
		{"more workers than items", PlanRequest{Items: items(2), Complexity: Low}, 0, 2, []int{1, 1}, ""},
		{"one item", PlanRequest{Items: items(1), Complexity: High}, 0, 1, []int{1}, ""},
		{"low 100", PlanRequest{Items: items(100), Complexity: Low}, 0, 4, []int{25, 25, 25, 25}, ""},
		{"medium default", PlanRequest{Items: items(10)}, 0, 3, []int{4, 3, 3}, ""},
		{"high 100", PlanRequest{Items: items(100), Complexity: High}, 0, 2, []int{50, 50}, ""},
		{"max_workers caps", PlanRequest{Items: items(7), Complexity: Low, MaxWorkers: 3}, 0, 3, []int{3, 2, 2}, ""},
		{"server caps", PlanRequest{Items: items(7), Complexity: Low}, 2, 2, []int{4, 3}, ""},
		{"bad complexity", PlanRequest{Items: items(3), Complexity: "extreme"}, 0, 0, nil, "complexity"},
		{"negative max", PlanRequest{Items: items(3), MaxWorkers: -1}, 0, 0, nil, "max_workers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanBatch(tc.req, tc.serverMax)
			if tc.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErrSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Workers != tc.workers || !reflect.DeepEqual(p.ChunkSizes, tc.sizes) || p.TotalItems != len(tc.req.Items) || len(p.Chunks) != len(tc.sizes) {
				t.Errorf("plan = %+v, want %d workers, sizes %v", p, tc.workers, tc.sizes)
			}
			var flat []any
			for _, c := range p.Chunks {
				flat = append(flat, c...)
			}
			if len(tc.req.Items) > 0 && !reflect.DeepEqual(flat, tc.req.Items) {
				t.Errorf("chunks lose or reorder items: %v", p.Chunks)
			}
		})
	}
}

// The seed's own example: four files in two chunks.
func TestChunkByCountSeedExample(t *testing.T) {
	got := ChunkByCount([]string{"file1.py", "file2.py", "file3.py", "file4.py"}, 2)
	want := [][]string{{"file1.py", "file2.py"}, {"file3.py", "file4.py"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
	if got := ChunkByCount([]int{1, 2}, 0); !reflect.DeepEqual(got, [][]int{{1, 2}}) {
		t.Errorf("n=0: %v", got)
	}
}

func TestChunkCode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      string
		max       int
		want      []string
		oversized []int
	}{
		{"empty", "", 10, []string{}, nil},
		{"fits", "a=1\nb=2\n", 100, []string{"a=1\nb=2\n"}, nil},
		{"split on lines", "a=1\nb=2\nc=3\n", 8, []string{"a=1\nb=2\n", "c=3\n"}, nil},
		{"no final newline", "a=1\nb=2", 4, []string{"a=1\n", "b=2"}, nil},
		{"exact fit", "abc\n", 4, []string{"abc\n"}, nil},
		{"long line alone", "a\n" + strings.Repeat("x", 10) + "\nb\n", 4, []string{"a\n", strings.Repeat("x", 10) + "\n", "b\n"}, []int{1}},
		{"utf-8 counted in bytes", "é\né\n", 3, []string{"é\n", "é\n"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChunkCode(ChunkRequest{Code: tc.code, MaxBytes: tc.max})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Chunks, tc.want) || !reflect.DeepEqual(got.Oversized, tc.oversized) {
				t.Errorf("got %q oversized %v, want %q %v", got.Chunks, got.Oversized, tc.want, tc.oversized)
			}
			if strings.Join(got.Chunks, "") != tc.code {
				t.Error("pieces do not join back to the input")
			}
			for i, c := range got.Chunks {
				if got.ChunkBytes[i] != len(c) {
					t.Errorf("chunk_bytes[%d] = %d, want %d", i, got.ChunkBytes[i], len(c))
				}
			}
			if (len(tc.oversized) > 0) != (got.Note != "") {
				t.Errorf("note = %q", got.Note)
			}
		})
	}
	if _, err := ChunkCode(ChunkRequest{Code: "x", MaxBytes: -1}); err == nil {
		t.Error("negative max_bytes accepted")
	}
	if got, _ := ChunkCode(ChunkRequest{Code: "x\n"}); len(got.Chunks) != 1 {
		t.Errorf("default max: %v", got)
	}
}

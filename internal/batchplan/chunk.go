package batchplan

import (
	"fmt"
	"strings"
)

// DefaultChunkBytes is the seed's default chunk size.
const DefaultChunkBytes = 500_000

// ChunkRequest is what chunk_code takes.
type ChunkRequest struct {
	Code     string `json:"code" jsonschema:"Source text to split."`
	MaxBytes int    `json:"max_bytes,omitempty" jsonschema:"Largest chunk in bytes (default 500000)."`
}

// ChunkResult is the split code.
type ChunkResult struct {
	Chunks     []string `json:"chunks" jsonschema:"The pieces, in order; joined they give back the code exactly."`
	ChunkBytes []int    `json:"chunk_bytes" jsonschema:"Size of each piece in bytes."`
	Oversized  []int    `json:"oversized,omitempty" jsonschema:"Indexes of pieces larger than max_bytes: each is one line that alone exceeds it (lines are never cut)."`
	Note       string   `json:"note,omitempty" jsonschema:"Caveats about the split."`
}

// ChunkCode splits code on line boundaries into pieces of at most maxBytes,
// each line kept whole with its newline, so the pieces join back to the
// exact input. A single line longer than maxBytes becomes a piece of its own
// and is reported as oversized: cutting inside a line would break a
// statement or a string, which no caller wants. Splitting by lines does not
// know Python's structure; each piece is only runnable on its own when the
// code is a sequence of independent top-level statements, as in the seed.
func ChunkCode(req ChunkRequest) (ChunkResult, error) {
	limit := req.MaxBytes
	switch {
	case limit < 0:
		return ChunkResult{}, fmt.Errorf("max_bytes: must be positive, got %d", limit)
	case limit == 0:
		limit = DefaultChunkBytes
	}
	out := ChunkResult{Chunks: []string{}, ChunkBytes: []int{}}
	var cur strings.Builder
	flush := func() {
		if cur.Len() == 0 {
			return
		}
		out.Chunks = append(out.Chunks, cur.String())
		out.ChunkBytes = append(out.ChunkBytes, cur.Len())
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(req.Code, "\n") {
		if line == "" {
			continue // SplitAfter's empty tail after a final newline
		}
		if cur.Len()+len(line) > limit {
			flush()
		}
		if len(line) > limit {
			out.Oversized = append(out.Oversized, len(out.Chunks))
			cur.WriteString(line)
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	if len(out.Oversized) > 0 {
		out.Note = fmt.Sprintf("%d line(s) are longer than max_bytes=%d and were kept whole in their own piece", len(out.Oversized), limit)
	}
	return out, nil
}

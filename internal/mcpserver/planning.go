package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/batchplan"
)

// PlanBatchInput is the input of plan_batch.
type PlanBatchInput struct {
	batchplan.PlanRequest
	Rendering
}

// PlanBatchOutput is the result of plan_batch.
type PlanBatchOutput struct {
	batchplan.Plan
}

// ChunkCodeInput is the input of chunk_code.
type ChunkCodeInput struct {
	batchplan.ChunkRequest
	Rendering
}

// ChunkCodeOutput is the result of chunk_code.
type ChunkCodeOutput struct {
	batchplan.ChunkResult
}

func (t *tools) registerPlanning(srv *mcp.Server) {
	addTool(t, srv, &mcp.Tool{
		Name:  "plan_batch",
		Title: "Plan a parallel batch",
		Description: "Suggest how many parallel workers to use for a list of work items (by complexity: low, medium, high; bounded by max_workers, " +
			"the server's worker cap and the number of items) and split the items into one chunk per worker, ready to turn into run_python_batch snippets.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.planBatch)
	addTool(t, srv, &mcp.Tool{
		Name:  "chunk_code",
		Title: "Split code into chunks",
		Description: "Split source text on line boundaries into pieces of at most max_bytes (default 500000) that join back exactly. " +
			"A single line longer than max_bytes is kept whole in its own piece and reported in oversized.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.chunkCode)
}

func (t *tools) planBatch(ctx context.Context, _ *mcp.CallToolRequest, in PlanBatchInput) (*mcp.CallToolResult, PlanBatchOutput, error) {
	serverMax := 0
	if info, err := t.ex.Info(ctx); err == nil {
		serverMax = info.Limits.MaxWorkers
	}
	p, err := batchplan.PlanBatch(in.PlanRequest, serverMax)
	if err != nil {
		return nil, PlanBatchOutput{}, toolError(err)
	}
	out := PlanBatchOutput{Plan: p}
	return render(in.Rendering, out, func() string {
		if p.TotalItems == 0 {
			return "No items: nothing to run (0 workers, no chunks).\n"
		}
		sizes := make([]string, len(p.ChunkSizes))
		for i, n := range p.ChunkSizes {
			sizes[i] = fmt.Sprint(n)
		}
		return fmt.Sprintf("Use **%d worker(s)** for %d items (%s). Chunk sizes: %s. Pass max_workers=%d to run_python_batch with one snippet per chunk.\n",
			p.Workers, p.TotalItems, p.Reason, strings.Join(sizes, ", "), p.Workers)
	}), out, nil
}

func (t *tools) chunkCode(_ context.Context, _ *mcp.CallToolRequest, in ChunkCodeInput) (*mcp.CallToolResult, ChunkCodeOutput, error) {
	c, err := batchplan.ChunkCode(in.ChunkRequest)
	if err != nil {
		return nil, ChunkCodeOutput{}, toolError(err)
	}
	out := ChunkCodeOutput{ChunkResult: c}
	return render(in.Rendering, out, func() string {
		s := fmt.Sprintf("%d piece(s) of %v bytes.", len(c.Chunks), c.ChunkBytes)
		if c.Note != "" {
			s += " " + c.Note + "."
		}
		return s + " The pieces are in structured content (chunks).\n"
	}), out, nil
}

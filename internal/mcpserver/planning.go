package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/batchplan"
	"github.com/pyexec/pyexec/internal/present"
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
	budget, _ := t.budget(OutputBudget{})
	return render(in.Rendering, out, func() string { return renderPlan(p, budget) }), out, nil
}

// renderPlan says how many workers to use and shows each chunk's items
// (as JSON), as many as fit the budget.
func renderPlan(p batchplan.Plan, budget int) string {
	if p.TotalItems == 0 {
		return "No items: nothing to run (0 workers, no chunks).\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Use **%d worker(s)** for %d items (%s). Pass max_workers=%d to run_python_batch with one snippet per chunk:\n\n",
		p.Workers, p.TotalItems, p.Reason, p.Workers)
	for i, chunk := range p.Chunks {
		items, err := json.Marshal(chunk)
		if err != nil {
			items = []byte(fmt.Sprint(chunk))
		}
		line := fmt.Sprintf("%d. (%d items) `%s`\n", i+1, len(chunk), strings.ReplaceAll(string(items), "`", "'"))
		if b.Len()+len(line) > budget {
			fmt.Fprintf(&b, "\nChunks %d-%d are not shown (over this result's size); all chunks are in structured content (chunks).\n", i+1, len(p.Chunks))
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

func (t *tools) chunkCode(_ context.Context, _ *mcp.CallToolRequest, in ChunkCodeInput) (*mcp.CallToolResult, ChunkCodeOutput, error) {
	c, err := batchplan.ChunkCode(in.ChunkRequest)
	if err != nil {
		return nil, ChunkCodeOutput{}, toolError(err)
	}
	out := ChunkCodeOutput{ChunkResult: c}
	budget, _ := t.budget(OutputBudget{})
	return render(in.Rendering, out, func() string { return renderChunks(c, budget) }), out, nil
}

// renderChunks shows the pieces themselves, in fences, as many as fit the
// budget, and says where the others are.
func renderChunks(c batchplan.ChunkResult, budget int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d piece(s) of %v bytes.", len(c.Chunks), c.ChunkBytes)
	if c.Note != "" {
		b.WriteString(" " + c.Note + ".")
	}
	b.WriteString("\n")
	for i, piece := range c.Chunks {
		var p strings.Builder
		fmt.Fprintf(&p, "\npiece %d (%s bytes):\n", i+1, present.Commas(int64(len(piece))))
		present.WriteFenced(&p, piece)
		if b.Len()+p.Len() > budget {
			fmt.Fprintf(&b, "\nPieces %d-%d are not shown (over this result's size); every piece is in structured content (chunks).\n", i+1, len(c.Chunks))
			break
		}
		b.WriteString(p.String())
	}
	return b.String()
}

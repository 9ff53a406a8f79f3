package mcpserver

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/executor"
)

// BenchmarkPythonInput is the input of benchmark_python.
type BenchmarkPythonInput struct {
	executor.BenchmarkRequest
	ScriptName string `json:"script_name,omitempty" jsonschema:"Name of a script saved with save_script to benchmark instead of code or script_path."`
	Rendering
}

// BenchmarkPythonOutput is the result of benchmark_python.
type BenchmarkPythonOutput struct {
	executor.BenchmarkResult
}

func (t *tools) registerBenchmark(srv *mcp.Server) {
	addTool(t, srv, &mcp.Tool{
		Name:  "benchmark_python",
		Title: "Benchmark Python code",
		Description: "Run Python code (or a script) repeat times after warmup runs and report per-run wall time, CPU user/system time and peak memory " +
			"(exact, from the kernel's accounting of the whole process tree, not sampled), with min/median/mean/max/stdev. " +
			"wall_time_seconds, cpu_time_seconds and peak_rss_mb are the medians. profile: true adds a cProfile table of the top functions by cumulative time. " +
			"Accepts everything run_python accepts.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.benchmarkPython)
}

func (t *tools) benchmarkPython(ctx context.Context, req *mcp.CallToolRequest, in BenchmarkPythonInput) (*mcp.CallToolResult, BenchmarkPythonOutput, error) {
	inline, err := t.resolveScriptName(ctx, &in.Request, in.ScriptName)
	if err != nil {
		return nil, BenchmarkPythonOutput{}, toolError(err)
	}
	if inline {
		t.autosave("benchmark_python", in.Request, "")
	}
	res, err := executor.Benchmark(ctx, t.ex, in.BenchmarkRequest, progressTo(ctx, req))
	if err != nil {
		return nil, BenchmarkPythonOutput{}, toolError(err)
	}
	out := BenchmarkPythonOutput{BenchmarkResult: res}
	return render(in.Rendering, out, func() string { return renderBenchmark(res) }), out, nil
}

func renderBenchmark(r executor.BenchmarkResult) string {
	var b strings.Builder
	if len(r.Runs) == 0 {
		// Nothing was measured (the warm-up failed): say so first, with no
		// table of zeros.
		b.WriteString("**benchmark failed** · no run was measured")
		if r.Note != "" {
			b.WriteString(": " + r.Note)
		}
		b.WriteString("\n\nThe failing run: ")
		b.WriteString(renderResult(r.Result))
		return b.String()
	}
	fmt.Fprintf(&b, "**benchmark** · %d measured run(s) after %d warm-up · %s · Python %s\n\n", len(r.Runs), r.Warmup, r.ExecutionStrategy, r.PythonVersionUsed)
	fmt.Fprintf(&b, "median: wall %.4f s · CPU %.4f s · peak RSS %.2f MiB\n\n", r.WallTimeSeconds, r.CPUTimeSeconds, r.PeakRSSMB)
	b.WriteString("| measure | min | median | mean | max | stdev |\n|---|---:|---:|---:|---:|---:|\n")
	row := func(name string, s executor.Stats, format string) {
		f := func(v float64) string { return fmt.Sprintf(format, v) }
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, f(s.Min), f(s.Median), f(s.Mean), f(s.Max), f(s.Stdev))
	}
	st := r.Statistics
	row("wall (s)", st.WallSeconds, "%.4f")
	row("CPU user+system (s)", st.CPUSeconds, "%.4f")
	row("CPU user (s)", st.CPUUserSeconds, "%.4f")
	row("CPU system (s)", st.CPUSystemSeconds, "%.4f")
	row("peak RSS, largest process (MiB)", st.PeakRSSMB, "%.2f")
	if st.PeakMemoryMB != nil {
		row("peak memory, whole cgroup (MiB)", *st.PeakMemoryMB, "%.2f")
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "\nnote: %s\n", r.Note)
	}
	b.WriteString("\nLast run: ")
	b.WriteString(renderResult(r.Result))
	writeProfileTable(&b, r.Profile)
	if r.ProfileNote != "" {
		fmt.Fprintf(&b, "\nprofile: %s\n", r.ProfileNote)
	}
	return b.String()
}

// writeProfileTable renders cProfile rows as a markdown table.
func writeProfileTable(b *strings.Builder, rows []executor.ProfileRow) {
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nProfile (top functions by cumulative time):\n\n| cumtime (s) | tottime (s) | calls | function | where |\n|---:|---:|---:|---|---|\n")
	for _, p := range rows {
		where := ""
		switch {
		case filepath.IsAbs(p.File): // a library: its name is enough
			where = fmt.Sprintf("%s:%d", filepath.Base(p.File), p.Line)
		case p.File != "": // <code>, or a workspace file by its relative path
			where = fmt.Sprintf("%s:%d", p.File, p.Line)
		}
		calls := fmt.Sprint(p.Calls)
		if p.PrimitiveCalls != p.Calls {
			calls = fmt.Sprintf("%d/%d", p.Calls, p.PrimitiveCalls)
		}
		fmt.Fprintf(b, "| %.4f | %.4f | %s | %s | %s |\n", p.CumtimeSeconds, p.TottimeSeconds, calls, mdCell(p.Function), mdCell(where))
	}
}

// mdCell keeps a value from breaking a markdown table row.
func mdCell(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.NewReplacer("|", `\|`, "`", "'", "\n", " ").Replace(s) + "`"
}

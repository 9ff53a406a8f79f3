package mcpserver

import (
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/present"
)

// renderResult is the markdown a model reads for one run, within the
// default budget (package present decides; tools with a budget of their own
// call present directly).
func renderResult(r engine.Result) string {
	return present.Run(present.RunInput{Result: r}).Markdown
}

// writeStream renders a chunk of a stream (job output reads, bounded by
// their max_bytes) in a fence the output cannot break.
func writeStream(b *strings.Builder, name, text string, total int64, truncated bool) {
	if total == 0 && text == "" {
		return
	}
	note := ""
	if truncated {
		note = fmt.Sprintf(", truncated: %d bytes in all, middle dropped", total)
	}
	fmt.Fprintf(b, "\n%s (%d bytes%s):\n", name, total, note)
	present.WriteFenced(b, text)
}

func renderInfo(info executor.Info) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**pyexec %s**\n\n", info.Version)
	fmt.Fprintf(&b, "- workspace: `%s`\n- state dir: `%s`\n- default interpreter: Python %s (`%s`)\n- uv: %s\n",
		info.Workspace, info.StateDir, info.DefaultInterpreter.Version, info.DefaultInterpreter.Path, info.UV)
	l := info.Limits
	fmt.Fprintf(&b, "- timeouts: %s\n", executor.TimeoutStory(l))
	fmt.Fprintf(&b, "- limits: code %s; stdin %s; inline output %s per stream; batch %d snippets, %d workers\n",
		engine.FormatBytes(int64(l.MaxCodeBytes)), engine.FormatBytes(int64(l.MaxStdinBytes)), engine.FormatBytes(int64(l.OutputCapBytes)), l.MaxBatch, l.MaxWorkers)
	sb := info.Sandbox
	fmt.Fprintf(&b, "- sandbox: %s, network %s, run-as %s; memory %s, %s processes, files up to %s\n",
		sb.Policy, sb.Network, sb.RunAs, engine.FormatBytes(sb.Limits.MemoryBytes), countOrUnlimited(sb.Limits.MaxProcs), engine.FormatBytes(sb.Limits.FileSizeBytes))
	fmt.Fprintf(&b, "- runs execute as: %s\n", sb.RunsAs)
	for _, m := range sb.Capabilities.List() {
		mark := "yes"
		if !m.Available {
			mark = "no"
		}
		fmt.Fprintf(&b, "  - %s: %s — %s\n", m.Name, mark, m.Detail)
	}
	if len(info.Interpreters) > 0 {
		b.WriteString("\nInterpreters (select with python_version):\n")
		for _, it := range info.Interpreters {
			fmt.Fprintf(&b, "- Python %s: `%s` (%s)\n", it.Version, it.Path, it.Source)
		}
	}
	return b.String()
}

func countOrUnlimited(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

package mcpserver

import (
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
)

// renderResult is the markdown a model reads for one run: outcome first,
// then the streams in fences that cannot be broken by the output itself.
func renderResult(r engine.Result) string {
	var b strings.Builder
	writeResult(&b, r, "")
	return b.String()
}

func writeResult(b *strings.Builder, r engine.Result, heading string) {
	outcome := "success"
	switch {
	case r.TimedOut:
		outcome = "timed out"
	case !r.Success:
		outcome = "failed"
	}
	if heading != "" {
		fmt.Fprintf(b, "### %s\n", heading)
	}
	fmt.Fprintf(b, "**%s** · exit code %d · %.3f s · %s · Python %s\n", outcome, r.ExitCode, r.ElapsedSeconds, r.ExecutionStrategy, r.PythonVersionUsed)
	if r.LimitExceeded != "" {
		fmt.Fprintf(b, "**limit exceeded: %s**\n", r.LimitExceeded)
	}
	for _, n := range r.SandboxNotes {
		fmt.Fprintf(b, "sandbox: %s\n", n)
	}
	if len(r.ResolvedDependencies) > 0 {
		fmt.Fprintf(b, "dependencies: %s\n", strings.Join(r.ResolvedDependencies, ", "))
	}
	writeStream(b, "stdout", r.Stdout, r.StdoutBytes, r.StdoutTruncated)
	writeStream(b, "stderr", r.Stderr, r.StderrBytes, r.StderrTruncated)
}

func writeStream(b *strings.Builder, name, text string, total int64, truncated bool) {
	if total == 0 && text == "" {
		return
	}
	note := ""
	if truncated {
		note = fmt.Sprintf(", truncated: %d bytes in all, middle dropped", total)
	}
	fmt.Fprintf(b, "\n%s (%d bytes%s):\n", name, total, note)
	fence := fenceFor(text)
	fmt.Fprintf(b, "%s\n%s", fence, text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(b, "%s\n", fence)
}

// fenceFor returns a backtick fence longer than any run of backticks in s.
func fenceFor(s string) string {
	longest, run := 0, 0
	for _, c := range s {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

func renderBatch(out executor.BatchResult) string {
	var b strings.Builder
	ok := 0
	for _, r := range out.Results {
		if r.Error == "" && r.Success {
			ok++
		}
	}
	fmt.Fprintf(&b, "%d of %d snippets succeeded.\n\n", ok, len(out.Results))
	for i, r := range out.Results {
		if r.Error != "" {
			fmt.Fprintf(&b, "### Snippet %d\n**rejected**: %s\n\n", i, r.Error)
			continue
		}
		writeResult(&b, r.Result, fmt.Sprintf("Snippet %d", i))
		b.WriteByte('\n')
	}
	return b.String()
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

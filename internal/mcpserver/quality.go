package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/present"
	"github.com/pyexec/pyexec/internal/quality"
)

// The quality toolset: format_code and lint_code, with the real ruff, run
// confined like code runs on the executing side (see package quality).

// FormatCodeInput is the input of format_code.
type FormatCodeInput struct {
	quality.FormatRequest
	Rendering
}

// LintCodeInput is the input of lint_code.
type LintCodeInput struct {
	quality.LintRequest
	Rendering
}

var errNoQuality = errors.New("this server's executor cannot format or lint (an execution server older than this front end?)")

func (t *tools) qualityExecutor() (executor.QualityExecutor, error) {
	q, ok := t.ex.(executor.QualityExecutor)
	if !ok {
		return nil, errNoQuality
	}
	return q, nil
}

func (t *tools) registerQuality(srv *mcp.Server) {
	addTool(t, srv, &mcp.Tool{
		Name:  "format_code",
		Title: "Format Python code (ruff)",
		Description: "Format inline code or a workspace .py file with ruff (black-compatible style; the project's pyproject.toml / ruff.toml settings apply unless isolated). " +
			"Returns the formatted code and a unified diff; check: true only says whether it would change. A file is rewritten only with write: true.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.formatCode)
	addTool(t, srv, &mcp.Tool{
		Name:  "lint_code",
		Title: "Lint Python code (ruff)",
		Description: "Check inline code or a workspace .py file with ruff and return its findings: rule, message, line, column, whether a fix is available. " +
			"select picks rules (e.g. [\"F\", \"E\"]; [\"S\"] for the bandit security rules). fix: true also returns the code with the safe fixes applied (written back only with write: true).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.lintCode)
}

func (t *tools) formatCode(ctx context.Context, _ *mcp.CallToolRequest, in FormatCodeInput) (*mcp.CallToolResult, quality.FormatResult, error) {
	q, err := t.qualityExecutor()
	if err != nil {
		return nil, quality.FormatResult{}, err
	}
	r, err := q.Format(ctx, in.FormatRequest)
	if err != nil {
		return nil, quality.FormatResult{}, err
	}
	return render(in.Rendering, r, func() string { return renderFormat(in.FormatRequest, r) }), r, nil
}

func (t *tools) lintCode(ctx context.Context, _ *mcp.CallToolRequest, in LintCodeInput) (*mcp.CallToolResult, quality.LintResult, error) {
	q, err := t.qualityExecutor()
	if err != nil {
		return nil, quality.LintResult{}, err
	}
	r, err := q.Lint(ctx, in.LintRequest)
	if err != nil {
		return nil, quality.LintResult{}, err
	}
	return render(in.Rendering, r, func() string { return renderLint(in.LintRequest, r) }), r, nil
}

func renderFormat(in quality.FormatRequest, r quality.FormatResult) string {
	var b strings.Builder
	switch {
	case !r.Changed:
		b.WriteString("**already formatted**: ruff would change nothing")
	case in.Check:
		b.WriteString("**would be reformatted** (check only: nothing returned or written)")
	case r.Written:
		fmt.Fprintf(&b, "**formatted** and written back to `%s`", r.Path)
	default:
		b.WriteString("**formatted** (nothing was written; pass write: true with script_path to rewrite the file)")
	}
	fmt.Fprintf(&b, " · %s\n", r.RuffVersion)
	if r.Diff != "" {
		b.WriteString("\ndiff:\n" + fenced("diff", r.Diff))
	}
	if r.Changed && r.Formatted != "" && !r.Written {
		b.WriteString("\nformatted code:\n" + fenced("python", r.Formatted))
	}
	return b.String()
}

func renderLint(in quality.LintRequest, r quality.LintResult) string {
	var b strings.Builder
	if r.Count == 0 {
		b.WriteString("**no findings**")
	} else {
		fmt.Fprintf(&b, "**%d finding(s)**", r.Count)
	}
	fmt.Fprintf(&b, " · %s\n", r.RuffVersion)
	for _, d := range r.Diagnostics {
		fix := ""
		if d.FixAvailable {
			fix = " [fix: " + d.FixApplicability + "]"
		}
		fmt.Fprintf(&b, "- %d:%d %s %s%s\n", d.Line, d.Column, d.Rule, d.Message, fix)
	}
	if r.Count > len(r.Diagnostics) {
		fmt.Fprintf(&b, "- … %d more (the first %d are shown)\n", r.Count-len(r.Diagnostics), len(r.Diagnostics))
	}
	if in.Fix {
		switch {
		case !r.Changed:
			b.WriteString("\nNo fix changed the code.\n")
		case r.Written:
			fmt.Fprintf(&b, "\nFixed and written back to `%s`; %d finding(s) remain.\n", r.Path, r.Remaining)
		default:
			fmt.Fprintf(&b, "\nFixed code (%d finding(s) remain; nothing was written):\n%s", r.Remaining, fenced("python", r.Fixed))
		}
		if r.Diff != "" {
			b.WriteString("\ndiff:\n" + fenced("diff", r.Diff))
		}
	}
	return b.String()
}

func fenced(lang, text string) string {
	fence := present.FenceFor(text)
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return fence + lang + "\n" + text + fence + "\n"
}

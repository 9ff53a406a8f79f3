package executor

import (
	"context"
	"sync"

	"github.com/pyexec/pyexec/internal/quality"
)

// QualityExecutor is an Executor that formats and lints code with ruff
// (format_code, lint_code; REST /v1/format and /v1/lint), confined like a
// run on the executing side.
type QualityExecutor interface {
	Format(ctx context.Context, req quality.FormatRequest) (quality.FormatResult, error)
	Lint(ctx context.Context, req quality.LintRequest) (quality.LintResult, error)
}

var _ QualityExecutor = (*Local)(nil)

// qualityRunner is Local's ruff runner, made on first use.
type qualityRunner struct {
	once sync.Once
	ruff string
	r    *quality.Runner
}

// SetRuff makes format and lint use this ruff binary instead of installing
// one (the --ruff flag). Call it before serving.
func (l *Local) SetRuff(path string) { l.quality.ruff = path }

func (l *Local) qualityRunner() *quality.Runner {
	l.quality.once.Do(func() { l.quality.r = quality.New(l.eng, l.quality.ruff) })
	return l.quality.r
}

// Format implements QualityExecutor.
func (l *Local) Format(ctx context.Context, req quality.FormatRequest) (quality.FormatResult, error) {
	return l.qualityRunner().Format(ctx, req)
}

// Lint implements QualityExecutor.
func (l *Local) Lint(ctx context.Context, req quality.LintRequest) (quality.LintResult, error) {
	return l.qualityRunner().Lint(ctx, req)
}

package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"math"

	"github.com/pyexec/pyexec/internal/engine"

	"github.com/pyexec/pyexec/internal/mcpserver"
	"github.com/pyexec/pyexec/internal/scripts"
)

// mcpFlags are the flags of every subcommand that serves MCP tools (stdio
// now, Streamable HTTP later): which tools, and the script store behind the
// scripts tools and autosave.
type mcpFlags struct {
	toolsets     string
	autosaveMax  int
	autosaveDays float64
}

func (f *mcpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.toolsets, "toolsets", mcpserver.DefaultToolsets,
		"comma-separated tool groups to offer: core (run, batch, benchmark, planning, server info), jobs, scripts (save/list/view), compat (every seed server's tools by their names); all = every group")
	fs.IntVar(&f.autosaveMax, "autosave-max", scripts.DefaultMaxAutosaved, "inline runs kept in the autosaved/ store (oldest removed first); negative disables autosave")
	fs.Float64Var(&f.autosaveDays, "autosave-max-age", scripts.DefaultMaxAge.Hours()/24, "days an autosaved inline run is kept")
}

// toolsetList validates --toolsets.
func (f *mcpFlags) toolsetList() ([]string, error) {
	sets, err := mcpserver.ParseToolsets(f.toolsets)
	if err != nil {
		return nil, fmt.Errorf("--toolsets: %w", err)
	}
	return sets, nil
}

// openStore opens the script store under stateDir (on the executing side:
// `pyexec mcp` without --executor, or `pyexec serve`). The caller closes
// it (it flushes pending autosaves).
func (f *mcpFlags) openStore(stateDir string, logger *slog.Logger) (*scripts.Store, error) {
	if f.autosaveMax == 0 {
		f.autosaveMax = -1 // 0 kept entries means no autosave at all
	}
	if f.autosaveDays <= 0 || math.IsNaN(f.autosaveDays) || math.IsInf(f.autosaveDays, 0) {
		return nil, fmt.Errorf("--autosave-max-age: must be a positive number of days, got %g", f.autosaveDays)
	}
	return scripts.Open(stateDir, scripts.Options{
		MaxAutosaved: f.autosaveMax,
		MaxAge:       engine.SecondsUpTo(f.autosaveDays*24*3600, 0),
		Logger:       logger,
	})
}

package cli

import (
	"flag"
	"fmt"
	"log/slog"

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

// open validates the toolsets and opens the script store under stateDir.
// The caller closes the store (it flushes pending autosaves).
func (f *mcpFlags) open(stateDir string, logger *slog.Logger) ([]string, *scripts.Store, error) {
	sets, err := mcpserver.ParseToolsets(f.toolsets)
	if err != nil {
		return nil, nil, fmt.Errorf("--toolsets: %w", err)
	}
	if f.autosaveMax == 0 {
		f.autosaveMax = -1 // 0 kept entries means no autosave at all
	}
	if f.autosaveDays <= 0 {
		return nil, nil, fmt.Errorf("--autosave-max-age: must be positive days, got %g", f.autosaveDays)
	}
	store, err := scripts.Open(stateDir, scripts.Options{
		MaxAutosaved: f.autosaveMax,
		MaxAge:       seconds(f.autosaveDays * 24 * 3600),
		Logger:       logger,
	})
	if err != nil {
		return nil, nil, err
	}
	return sets, store, nil
}

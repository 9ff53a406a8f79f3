package engine

import "time"

// AutoPreload configures adaptive preload (adaptive.go): a warm interpreter
// learns which costly modules its runs import, and a replacement that has
// them imported before it forks takes over in the background.
type AutoPreload struct {
	// MinCost is how long a module's import must take for preloading it to
	// be worth a fork server's memory. Default 20 ms.
	MinCost time.Duration
	// Window and Hits: a module is a candidate once Hits of the last Window
	// runs of a warm interpreter imported it. Defaults 10 and 2.
	Window, Hits int
	// MaxModules caps the modules adaptive preload adds to one warm
	// interpreter. Default 8.
	MaxModules int
	// MemoryBytes is the resident memory one fork server may reach with its
	// preloads; a module that takes it past is excluded. Default 1 GiB.
	MemoryBytes int64
}

func (a AutoPreload) withDefaults() AutoPreload {
	if a.MinCost <= 0 {
		a.MinCost = 20 * time.Millisecond
	}
	if a.Window <= 0 {
		a.Window = 10
	}
	if a.Hits <= 0 {
		a.Hits = 2
	}
	if a.Window < a.Hits {
		a.Window = a.Hits
	}
	if a.MaxModules <= 0 {
		a.MaxModules = 8
	}
	if a.MemoryBytes <= 0 {
		a.MemoryBytes = 1 << 30
	}
	return a
}

// PreloadStats is what adaptive preload learned, per interpreter.
type PreloadStats struct {
	MinCostMS   float64                  `json:"min_cost_ms" jsonschema:"Import time a module must cost to be preloaded."`
	MaxModules  int                      `json:"max_modules" jsonschema:"Most modules preloaded per warm interpreter."`
	MemoryBytes int64                    `json:"memory_budget_bytes" jsonschema:"Resident memory a warm interpreter may reach with its preloads."`
	PerPython   []InterpreterPreloadStat `json:"interpreters,omitempty" jsonschema:"Per interpreter (or uv environment) whose runs were seen."`
}

// InterpreterPreloadStat is adaptive preload's state for one interpreter.
type InterpreterPreloadStat struct {
	Interpreter string             `json:"interpreter" jsonschema:"The interpreter (a uv environment's python for dependency runs)."`
	Preloaded   []string           `json:"preloaded" jsonschema:"Modules its warm interpreters import before forking, learned from runs."`
	CostMS      map[string]float64 `json:"import_ms,omitempty" jsonschema:"Measured import time of each module tried, in milliseconds."`
	RSSBytes    int64              `json:"rss_bytes,omitempty" jsonschema:"Resident memory of its newest warm interpreter after preloading."`
	Starting    bool               `json:"replacement_starting,omitempty" jsonschema:"A warm interpreter with more modules preloaded is starting; the current one serves meanwhile."`
	Excluded    []PreloadExclusion `json:"excluded,omitempty" jsonschema:"Modules runs imported that are not preloaded, and why."`
}

// PreloadExclusion is a module adaptive preload will not preload.
type PreloadExclusion struct {
	Module string `json:"module" jsonschema:"The module (a top-level name, or an entry point like matplotlib.pyplot)."`
	Reason string `json:"reason" jsonschema:"Why it is not preloaded (fails to import, starts threads at import, unsafe to fork, cheaper than the threshold, over the memory budget, or waiting for room under the cap)."`
}

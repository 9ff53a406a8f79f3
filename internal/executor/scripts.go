package executor

import (
	"context"

	"github.com/pyexec/pyexec/internal/scripts"
)

// Scripts is where saved and autosaved scripts live: always the executing
// side, like jobs and runs. The local implementation is the state dir's
// scripts.Store (LocalScripts); the remote one is httpapi.Client, so under
// `pyexec mcp --executor URL` save_script saves on the execution server and
// script_name runs what is saved there. Front ends never know which one
// they hold.
type Scripts interface {
	SaveScript(ctx context.Context, req scripts.SaveRequest) (scripts.Entry, error)
	ListScripts(ctx context.Context, includeAutosaved bool) ([]scripts.Entry, error)
	ViewScript(ctx context.Context, name string, autosaved bool) (scripts.Script, error)
	// ScriptSource is the code of a saved script, to run it as inline code.
	ScriptSource(ctx context.Context, name string) (string, error)
	// Autosave keeps an inline run's code. It never blocks and never fails
	// the run: what cannot be kept is dropped.
	Autosave(rec scripts.AutosaveRecord)
}

// LocalScripts serves Scripts from a store in this process.
type LocalScripts struct{ Store *scripts.Store }

var _ Scripts = LocalScripts{}

// SaveScript implements Scripts.
func (l LocalScripts) SaveScript(_ context.Context, req scripts.SaveRequest) (scripts.Entry, error) {
	return l.Store.Save(req)
}

// ListScripts implements Scripts.
func (l LocalScripts) ListScripts(_ context.Context, includeAutosaved bool) ([]scripts.Entry, error) {
	return l.Store.List(includeAutosaved)
}

// ViewScript implements Scripts.
func (l LocalScripts) ViewScript(_ context.Context, name string, autosaved bool) (scripts.Script, error) {
	return l.Store.View(name, autosaved)
}

// ScriptSource implements Scripts.
func (l LocalScripts) ScriptSource(_ context.Context, name string) (string, error) {
	return l.Store.Source(name)
}

// Autosave implements Scripts.
func (l LocalScripts) Autosave(rec scripts.AutosaveRecord) { l.Store.Autosave(rec) }

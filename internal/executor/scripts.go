package executor

import (
	"context"
	"errors"

	"github.com/pyexec/pyexec/internal/jobs"
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
	// RemoveOrphanedAutosaves removes the autosaved code of jobs that no
	// longer exist (after a prune) and says how many it removed.
	RemoveOrphanedAutosaves(ctx context.Context) (int, error)
}

// LocalScripts serves Scripts from a store in this process. Jobs, when set,
// are the jobs whose autosaves RemoveOrphanedAutosaves keeps.
type LocalScripts struct {
	Store *scripts.Store
	Jobs  JobExecutor
}

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

// RemoveOrphanedAutosaves implements Scripts.
func (l LocalScripts) RemoveOrphanedAutosaves(ctx context.Context) (int, error) {
	if l.Jobs == nil {
		return 0, nil
	}
	l.Store.Flush()
	return l.Store.RemoveAutosaved(func(s scripts.Sidecar) bool {
		if s.JobID == "" {
			return false
		}
		_, err := l.Jobs.Job(ctx, s.JobID)
		return errors.Is(err, jobs.ErrNotFound)
	})
}

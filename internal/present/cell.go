package present

import (
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/distname"
	"github.com/pyexec/pyexec/internal/engine"
)

// CellInput is what a session cell showed besides its streams, value and
// error: its displays and the files it changed.
type CellInput struct {
	Display   []engine.Display
	Files     []engine.FileChange
	FilesNote string
	Where     Where // where its images are kept (the cell's job), when not inline
	Budget    int   // the whole result's characters; 0: DefaultBudget
}

// CellView is a cell's displays and files presented as a run's are: the
// same inline image rules (MaxInlineImages, MaxImageBytes), the same text
// forms within a fifth of the budget, and the same links.
type CellView struct {
	Display []engine.Display    // the bundles within the budget (images replaced by a reference)
	Files   []engine.FileChange // at most the files a result lists
	Text    string              // "displayed:" and "files:" sections of the markdown
	Images  []Image
	Links   []Link
	Infos   []ImageInfo
}

// Cell presents a session cell's displays and files.
func Cell(in CellInput) CellView {
	budget := in.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	var v View
	ds, text := presentDisplays(in.Display, budget/5, in.Where, &v)
	var b strings.Builder
	b.WriteString(text)
	writeFiles(&b, in.Files, in.FilesNote, &v)
	return CellView{Display: ds, Files: clipFiles(in.Files), Text: b.String(), Images: v.Images, Links: v.Links, Infos: v.Extra.Images}
}

// CellHintInput is what a cell's hint is chosen from.
type CellHintInput struct {
	Session       string
	Error         *engine.CellError
	Stderr        string
	Sandbox       string // the session's confinement (engine.CellResult.Sandbox)
	LimitExceeded string // a limit behind the cell's exception
	LostReason    string // set when the cell cost the session
	TimedOut      bool
	Code          string
}

// CellHint is Hint for a session cell: the same known fixes, said the way
// a session applies them (a missing package is installed into the live
// session by the next call's dependencies; a limit is fixed at creation).
func CellHint(in CellHintInput) string {
	e := in.Error
	denied := strings.Contains(in.Sandbox, "network deny")
	switch {
	case e != nil && e.Ename == "ModuleNotFoundError":
		mod := missingModule(e.Evalue)
		if mod == "" {
			break
		}
		dist := distname.ForImport(mod)
		if dist == "" {
			return fmt.Sprintf("the module %q is not installed in session %s, and its name does not say which package provides it: find the distribution that does and pass dependencies: [...] on the next run_python call with session=%q (it installs into this session; its variables stay), or run `pip install` in a cell", mod, in.Session, in.Session)
		}
		return fmt.Sprintf("the module %q is not installed in session %s: pass dependencies: [%q] on the next run_python call with session=%q; it installs into this session (its variables stay) and the cell can import it at once. `pip install %s` in a cell does the same", mod, in.Session, dist, in.Session, dist)
	case denied && (netErrors.MatchString(tail(in.Stderr, 8192)) || e != nil && (isNetError(&engine.RunError{EName: e.Ename, EValue: e.Evalue}) || netErrors.MatchString(tail(e.Traceback, 8192)))):
		return "the network is denied for this session (" + networkSetting(in.Sandbox) + "), so connections, name lookups and pip installs from the package index fail; it is fixed when the session is created: use a session created without network: deny, or give the data as a file (write_file)"
	case in.LostReason != "" && isLimit(in.LostReason):
		return "the session was killed for its " + in.LostReason + " limit: " + sessionLimitHint(in.LostReason)
	case in.LimitExceeded != "":
		return "the cell hit the session's " + in.LimitExceeded + " limit (the session survives): " + sessionLimitHint(in.LimitExceeded)
	case in.TimedOut:
		return "the cell hit its timeout and was interrupted (the session and its variables survive): raise timeout (seconds) on the call, or run it with mode: \"async\" and follow it with get_job"
	}
	return ""
}

func isLimit(reason string) bool {
	switch reason {
	case "memory", "cpu", "processes", "file_size":
		return true
	}
	return false
}

// sessionLimitHint is limitHint for a session: limits are set when it is
// created, for all its processes together.
func sessionLimitHint(limit string) string {
	h := limitHint(limit)
	h = strings.Replace(h, "the run ", "the session ", 1)
	return h + " (limits are fixed when a session is created: session_create with the new limits, under a new name or after session_close)"
}

// missingModule is the module a ModuleNotFoundError names: "No module
// named 'x.y'" gives x (the top-level package is what is installed).
func missingModule(evalue string) string {
	_, rest, ok := strings.Cut(evalue, "No module named ")
	if !ok {
		return ""
	}
	rest = strings.Trim(strings.TrimSpace(rest), `'"`)
	mod, _, _ := strings.Cut(rest, ".")
	return mod
}

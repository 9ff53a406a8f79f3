package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/present"
	"github.com/pyexec/pyexec/internal/session"
)

// The sessions toolset: live Python namespaces across calls (package
// session), and run_python's session field.

// SessionCell is what run_python adds to its result when it ran a cell in
// a session.
type SessionCell struct {
	Session        string            `json:"session,omitempty" jsonschema:"The session the code ran in (absent for a plain run)."`
	SessionCreated bool              `json:"session_created,omitempty" jsonschema:"True when this call created the session."`
	ExecutionCount int               `json:"execution_count,omitempty" jsonschema:"Number of this cell in the session (1 for the first)."`
	Value          *string           `json:"result,omitempty" jsonschema:"repr() of the cell's last expression, as in a notebook (absent when the cell ends with a statement or the value is None). The value is also bound to _. When it has rich forms (a DataFrame, an image, a figure), display also holds it with source result."`
	Error          *engine.CellError `json:"error,omitempty" jsonschema:"The exception that ended the cell (the session and its variables survive it)."`
	Interrupted    bool              `json:"interrupted,omitempty" jsonschema:"True when the cell was stopped by KeyboardInterrupt (timeout, session_interrupt or a cancelled request); the session survives."`
	SessionStatus  string            `json:"session_status,omitempty" jsonschema:"The session's status after the cell: idle, lost (the cell cost the session, see lost_reason) or closed (the cell called sys.exit)."`
	LostReason     string            `json:"lost_reason,omitempty" jsonschema:"Why the session ended during this cell: timeout, interrupt_failed, memory, processes, killed, ..."`
	LostDetail     string            `json:"lost_detail,omitempty" jsonschema:"What ended the session, in words."`
	ExpiresAt      *time.Time        `json:"expires_at,omitempty" jsonschema:"When the session will be closed unless used again (its idle timeout, or its maximum lifetime if sooner)."`
	Installed      []string          `json:"installed,omitempty" jsonschema:"Requirements this call installed into the session's own package overlay before the cell ran (dependencies it did not have yet)."`
}

// SessionNameInput names a session.
type SessionNameInput struct {
	Session string `json:"session" jsonschema:"The session's name."`
	Rendering
}

// SessionCreateInput is the input of session_create.
type SessionCreateInput struct {
	session.CreateRequest
	Rendering
}

// SessionListInput is the (empty) input of session_list.
type SessionListInput struct {
	Rendering
}

// SessionListOutput is the result of session_list.
type SessionListOutput struct {
	Sessions    []session.Info `json:"sessions" jsonschema:"Every session, oldest first, lost and expired ones included until their loss was reported."`
	MaxSessions int            `json:"max_sessions,omitempty" jsonschema:"How many live sessions this server allows."`
}

func (t *tools) sessionExecutor() (executor.SessionExecutor, error) {
	sx, ok := t.ex.(executor.SessionExecutor)
	if !ok || !t.sessionsOn {
		return nil, errors.New("session: sessions are not enabled on this server (toolset sessions); run without session, and keep state in workspace files")
	}
	return sx, nil
}

func (t *tools) registerSessions(srv *mcp.Server) {
	if _, ok := t.ex.(executor.SessionExecutor); !ok {
		return
	}
	t.sessionsOn = true
	addTool(t, srv, &mcp.Tool{
		Name:  "session_create",
		Title: "Create a Python session",
		Description: "Start a live Python session: one interpreter whose variables, imports and loaded data persist across run_python calls that pass the same session name (like a notebook kernel). " +
			"Use a session for iterative work: load a file or import a heavy library (pandas) once, then inspect, clean and plot in later calls without reloading. " +
			"Use a plain run_python (no session) for independent one-off code: it shares nothing and cannot be left in a bad state. " +
			"run_python with a new session name creates the session too; session_create also sets idle_timeout and label. Settings (interpreter or named environment env, cwd, env_vars, sandbox, network, limits) are fixed at creation; dependencies are not: a later call's dependencies that the session lacks are installed into its own package overlay (confined, with uv) and import at once, and `pip install` inside a cell does the same. " +
			"A session is confined like a run, its limits apply to all its processes together, and it is closed after its idle timeout (default 30 min).",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, t.sessionCreate)
	addTool(t, srv, &mcp.Tool{
		Name:        "session_list",
		Title:       "List Python sessions",
		Description: "List the sessions with status (idle, busy, lost with the reason, closed), execution_count, idle time, expiry and memory.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, t.sessionList)
	addTool(t, srv, &mcp.Tool{
		Name:        "session_close",
		Title:       "Close a Python session",
		Description: "Close a session: its interpreter and every process it started are killed, and its final stats (cells run, peak memory, CPU) are returned. Close sessions you no longer need; the server allows a limited number.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, t.sessionClose)
	addTool(t, srv, &mcp.Tool{
		Name:        "session_reset",
		Title:       "Reset a Python session",
		Description: "Replace a session's interpreter by a fresh one with the same settings: every variable and import is gone and execution_count starts again at 0. Use it when the namespace is in a state you cannot repair.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
	}, t.sessionReset)
	addTool(t, srv, &mcp.Tool{
		Name:  "session_interrupt",
		Title: "Interrupt a session's running cell",
		Description: "Raise KeyboardInterrupt in the cell a session is running (like Ctrl-C in a notebook); the variables are kept. " +
			"If the cell does not stop within a short grace (C code ignoring signals), the session is killed and reported lost with reason interrupt_failed.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
	}, t.sessionInterrupt)
	addTool(t, srv, &mcp.Tool{
		Name:  "session_export",
		Title: "Export a session as a Jupyter notebook",
		Description: "Write a session's cells as a Jupyter notebook (nbformat 4) at a .ipynb path in the workspace, e.g. to hand the analysis to a person: each cell's code, stdout and stderr streams, what it displayed (figures as PNG images, DataFrames as HTML tables, other rich reprs) as display_data, its value as execute_result and its exception as an error output. " +
			"The history it is written from keeps the last 200 cells and at most 32 MiB of images (older cells lose theirs first, and the notebook's metadata says what was dropped). The notebook is also readable as the resource session://{name}/notebook.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
	}, t.sessionExport)
	for _, tmpl := range []*mcp.ResourceTemplate{
		{Name: "session-notebook", Title: "Session as a notebook", URITemplate: "session://{name}/notebook", MIMEType: "application/x-ipynb+json",
			Description: "A session's history as a Jupyter notebook (nbformat 4)."},
		{Name: "session", Title: "Session state", URITemplate: "session://{name}", MIMEType: "application/json",
			Description: "A session's status, settings, execution_count, created, last used, expires_at, memory now and peak, as JSON."},
		{Name: "session-history", Title: "Session history", URITemplate: "session://{name}/history", MIMEType: "application/json",
			Description: "The cells a session ran (the last 200), oldest first: code, streams (each cut to 64 KiB), result, error, the files each changed and what each displayed as MIME bundles (images base64; at most 32 displays per cell and 32 MiB of images per session, older cells losing theirs first; outputs_note says what a cell lost)."},
	} {
		srv.AddResourceTemplate(tmpl, t.readSessionResource)
	}
}

// runInSession is run_python with session set: the code runs as a cell.
func (t *tools) runInSession(ctx context.Context, req *mcp.CallToolRequest, in RunPythonInput) (*mcp.CallToolResult, RunPythonOutput, error) {
	sx, err := t.sessionExecutor()
	if err != nil {
		return nil, RunPythonOutput{}, err
	}
	r := in.Request
	switch {
	case in.ScriptName != "":
		return nil, RunPythonOutput{}, &engine.RequestError{Field: "script_name", Message: "cannot be combined with session: pass the code itself"}
	case r.ScriptPath != "":
		return nil, RunPythonOutput{}, &engine.RequestError{Field: "script_path", Message: "cannot be combined with session: pass code, e.g. exec(open(PATH).read())"}
	case len(r.Args) > 0:
		return nil, RunPythonOutput{}, &engine.RequestError{Field: "args", Message: "cannot be combined with session: a session has one sys.argv; set variables in the code instead"}
	case r.Stdin != "":
		return nil, RunPythonOutput{}, &engine.RequestError{Field: "stdin", Message: "cannot be combined with session: read workspace files instead"}
	}
	if err := in.JobOptions.check(t.jobs != nil); err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	budget, err := t.budget(in.OutputBudget)
	if err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	rr := session.RunRequest{Session: in.Session, Code: r.Code, Timeout: r.Timeout, Settings: session.FromRequest(r), Async: in.Mode == "async", OutputBudget: budget}
	if t.jobs != nil && t.jobs.budget > 0 {
		rr.SyncBudget = t.jobs.budget.Seconds()
	}
	if tk := taskFrom(ctx); tk != nil {
		// A task is the wait for the cell: no handoff; locally the cell is
		// a kept job the task names (cancelling the task interrupts it).
		rr.SyncBudget, rr.Async = 0, false
		if t.jobs != nil {
			rr.OnJob = tk.setJob
		}
	}
	cell, err := sx.SessionRun(ctx, rr, progressTo(ctx, req))
	if err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	out := cellOutput(cell)
	where := present.Where{JobID: cell.JobID}
	if where.JobID == "" {
		where.JobID = cell.OutputJobID // a finished cell whose job was kept
	}
	if where.JobID == "" {
		where.Note = fmt.Sprintf("the session's history (session://%s/history) keeps the last 64 KiB of each stream; print less, or write large output to a file and read_file it", cell.Session)
	}
	cut := fitCell(&out, budget, where)
	if cell.JobID != "" {
		return render(in.Rendering, out, func() string { return renderCellJob(out) }), out, nil
	}
	return t.presentCell(in, cell, &out, budget, where, cut), out, nil
}

// presentCell adds to a finished cell's result what it displayed and the
// files it changed, presented as a run's are (package present): images
// inline within the same limits, the rest linked to the cell's kept job,
// and the hint for a known fix.
func (t *tools) presentCell(in RunPythonInput, cell session.CellResult, out *RunPythonOutput, budget int, where present.Where, cut bool) *mcp.CallToolResult {
	cv := present.Cell(present.CellInput{Display: cell.Display, Files: cell.Files, FilesNote: cell.FilesNote, Where: where, Budget: budget})
	out.Result.Display, out.Result.Files, out.Result.FilesNote, out.Result.OutputNotes = cv.Display, cv.Files, cell.FilesNote, cell.OutputNotes
	out.Result.OutputJobID, out.Result.LimitExceeded = cell.OutputJobID, cell.LimitExceeded
	out.Extra.Images = cv.Infos
	out.Extra.Hint = present.CellHint(present.CellHintInput{Session: cell.Session, Error: cell.Error, Stderr: cell.Stderr, Sandbox: cell.Sandbox,
		LimitExceeded: cell.LimitExceeded, LostReason: cell.LostReason, TimedOut: cell.TimedOut, Code: in.Code})
	v := present.View{Images: cv.Images, Links: cv.Links}
	if cut && where.JobID != "" {
		out.Extra.OutputCut, out.Extra.OutputURI = true, "job://"+where.JobID+"/output"
		v.Links = append([]present.Link{{URI: out.Extra.OutputURI, Name: "output", Title: "Full output of cell " + fmt.Sprint(cell.ExecutionCount),
			MIME: "text/plain", Size: cell.StdoutBytes + cell.StderrBytes, Description: "The cell's complete stdout and stderr (up to the job log cap)."}}, v.Links...)
	}
	v.Markdown = renderCell(*out, cv.Text)
	return encodeView(in.Rendering, v, *out)
}

// fitCell keeps a cell's streams, result and traceback within the result
// budget, as a plain run's are: head and tail of each stream with a marker
// saying where the rest is (the cell's job when it was handed off or kept;
// the session's history keeps the last 64 KiB of each stream otherwise).
// It reports whether a stream was cut.
func fitCell(out *RunPythonOutput, budget int, where present.Where) bool {
	var cut bool
	out.Stdout, out.Stderr, cut = present.CutOutput(out.Stdout, out.Stderr, out.StdoutBytes, out.StderrBytes, budget, where)
	out.StdoutTruncated = out.StdoutTruncated || cut && int64(len(out.Stdout)) < out.StdoutBytes
	out.StderrTruncated = out.StderrTruncated || cut && int64(len(out.Stderr)) < out.StderrBytes
	// The result's repr and the traceback share what the streams left.
	rest := max(budget/5, 1000)
	if v := out.SessionCell.Value; v != nil && len(*v) > rest {
		clipped := present.Clip(*v, rest)
		out.SessionCell.Value = &clipped
	}
	if e := out.SessionCell.Error; e != nil && len(e.Traceback) > rest {
		e.Traceback = present.Clip(e.Traceback, rest)
	}
	return cut
}

// cellOutput shapes a cell's result as run_python's: the same stdout,
// stderr, exit code and success, plus the session's fields.
func cellOutput(c session.CellResult) RunPythonOutput {
	res := engine.Result{Stdout: c.Stdout, Stderr: c.Stderr, StdoutBytes: c.StdoutBytes, StderrBytes: c.StderrBytes,
		StdoutTruncated: c.StdoutTruncated, StderrTruncated: c.StderrTruncated, TimedOut: c.TimedOut,
		ElapsedSeconds: c.ElapsedSeconds, ExecutionStrategy: "session", PythonVersionUsed: c.Python}
	switch {
	case c.Status == session.StatusLost:
		res.ExitCode = -1
	case c.Exited != nil:
		res.ExitCode = *c.Exited
	case c.Error != nil:
		res.ExitCode = 1
	}
	res.Success = res.ExitCode == 0 && !c.TimedOut && c.Error == nil
	sc := SessionCell{Session: c.Session, SessionCreated: c.SessionCreated, ExecutionCount: c.ExecutionCount, Value: c.Result, Error: c.Error,
		Interrupted: c.Interrupted, SessionStatus: c.Status, LostReason: c.LostReason, LostDetail: c.LostDetail, Installed: c.Installed}
	if !c.ExpiresAt.IsZero() {
		e := c.ExpiresAt
		sc.ExpiresAt = &e
	}
	out := RunPythonOutput{Result: res, SessionCell: sc}
	if c.JobID != "" {
		out.Success = false
		out.Handoff = Handoff{JobID: c.JobID, Status: c.JobStatus, NextStdoutOffset: c.NextStdoutOffset, NextStderrOffset: c.NextStderrOffset}
		if c.NextStdoutOffset == 0 && c.NextStderrOffset == 0 && c.Stdout == "" && c.Stderr == "" {
			out.Message = fmt.Sprintf("Cell started as background job %s in session %s. Follow it with get_job(job_id=%q, wait=30); stop it with session_interrupt or cancel_job. The session is busy until the cell ends.", c.JobID, c.Session, c.JobID)
		} else {
			out.Message = fmt.Sprintf("Cell %d is still running after the sync budget: it continues as background job %s and session %s stays busy until it ends. Output so far is included; get the rest with get_job(job_id=%q, stdout_offset=%d, stderr_offset=%d, wait=30) (its stdout ends with Out[N]: the cell's value), or stop it with session_interrupt.",
				c.ExecutionCount, c.JobID, c.Session, c.JobID, c.NextStdoutOffset, c.NextStderrOffset)
		}
	}
	return out
}

func renderCellJob(o RunPythonOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**still running** · session `%s` · job `%s` · %s\n\n%s\n", o.SessionCell.Session, o.JobID, o.Handoff.Status, o.Message)
	writeStream(&b, "stdout so far", o.Stdout, o.NextStdoutOffset, false)
	writeStream(&b, "stderr so far", o.Stderr, o.NextStderrOffset, false)
	return b.String()
}

// renderCell is a finished cell's markdown; displays is present.Cell's
// text (what the cell displayed and the files it changed).
func renderCell(o RunPythonOutput, displays string) string {
	var b strings.Builder
	s := o.SessionCell
	outcome := "ok"
	switch {
	case s.SessionStatus == session.StatusLost:
		outcome = "session lost"
	case s.SessionStatus == session.StatusClosed:
		outcome = "session ended (sys.exit)"
	case o.TimedOut:
		outcome = "timed out (interrupted)"
	case s.Interrupted:
		outcome = "interrupted"
	case s.Error != nil:
		outcome = "error"
	}
	created := ""
	if s.SessionCreated {
		created = " (created)"
	}
	fmt.Fprintf(&b, "**%s** · session `%s`%s · cell [%d] · %.3f s · Python %s\n", outcome, s.Session, created, s.ExecutionCount, o.ElapsedSeconds, o.PythonVersionUsed)
	if len(s.Installed) > 0 {
		fmt.Fprintf(&b, "installed into the session: %s\n", strings.Join(s.Installed, ", "))
	}
	if s.LostReason != "" {
		fmt.Fprintf(&b, "**%s**: %s. Its variables are gone; the next call with this name starts a new session.\n", s.LostReason, s.LostDetail)
	}
	if o.Extra.Hint != "" {
		fmt.Fprintf(&b, "**hint**: %s\n", o.Extra.Hint)
	}
	if n := len(o.Display); n > 0 {
		inline := 0
		for _, im := range o.Extra.Images {
			if im.Inline {
				inline++
			}
		}
		fmt.Fprintf(&b, "the cell displayed %d output(s), %d image(s) (%d inline in this result)\n", n, len(o.Extra.Images), inline)
	}
	writeStream(&b, "stdout", o.Stdout, o.StdoutBytes, o.StdoutTruncated)
	writeStream(&b, "stderr", o.Stderr, o.StderrBytes, o.StderrTruncated)
	rich := 0
	for i, d := range o.Display {
		if d.Source == "result" {
			rich = i + 1
		}
	}
	switch {
	case s.Value != nil && rich > 0:
		fmt.Fprintf(&b, "result: Out[%d], shown in rich form as display %d below\n", s.ExecutionCount, rich)
	case s.Value != nil:
		fence := present.FenceFor(*s.Value)
		fmt.Fprintf(&b, "result:\n%s\n%s\n%s\n", fence, *s.Value, fence)
	}
	if s.Error != nil {
		fence := present.FenceFor(s.Error.Traceback)
		fmt.Fprintf(&b, "error: %s: %s\n%s\n%s%s\n", s.Error.Ename, s.Error.Evalue, fence, strings.TrimRight(s.Error.Traceback, "\n")+"\n", fence)
	}
	b.WriteString(displays)
	if s.ExpiresAt != nil {
		fmt.Fprintf(&b, "session expires at %s unless used\n", s.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return b.String()
}

func (t *tools) sessionCreate(ctx context.Context, req *mcp.CallToolRequest, in SessionCreateInput) (*mcp.CallToolResult, session.Info, error) {
	sx, err := t.sessionExecutor()
	if err != nil {
		return nil, session.Info{}, err
	}
	info, err := sx.SessionCreate(ctx, in.CreateRequest)
	if err != nil {
		return nil, session.Info{}, err
	}
	return render(in.Rendering, info, func() string {
		return fmt.Sprintf("**created** session `%s` in %.0f ms · Python %s · expires at %s unless used\nRun code in it with run_python(session=%q, code=...).\n",
			info.Name, info.StartSeconds*1000, info.Python, info.ExpiresAt.Format(time.RFC3339), info.Name)
	}), info, nil
}

func (t *tools) sessionList(ctx context.Context, req *mcp.CallToolRequest, in SessionListInput) (*mcp.CallToolResult, SessionListOutput, error) {
	sx, err := t.sessionExecutor()
	if err != nil {
		return nil, SessionListOutput{}, err
	}
	list, err := sx.SessionList(ctx)
	if err != nil {
		return nil, SessionListOutput{}, err
	}
	out := SessionListOutput{Sessions: list}
	return render(in.Rendering, out, func() string {
		if len(list) == 0 {
			return "No sessions. run_python with session=NAME creates one.\n"
		}
		var b strings.Builder
		for _, s := range list {
			b.WriteString("- " + sessionLine(s) + "\n")
		}
		return b.String()
	}), out, nil
}

func sessionLine(s session.Info) string {
	line := fmt.Sprintf("`%s` · %s · %d cells", s.Name, s.Status, s.ExecutionCount)
	switch s.Status {
	case session.StatusIdle:
		line += fmt.Sprintf(" · idle %s · expires %s", (time.Duration(s.IdleSeconds) * time.Second).String(), s.ExpiresAt.Format(time.RFC3339))
	case session.StatusBusy:
		line += fmt.Sprintf(" · running cell %d for %.1fs", s.RunningCell, s.RunningSeconds)
	case session.StatusLost, session.StatusClosed:
		if s.LostReason != "" {
			line += fmt.Sprintf(" · %s: %s", s.LostReason, s.LostDetail)
		}
	}
	if s.MemoryBytes > 0 {
		line += fmt.Sprintf(" · %.1f MB", float64(s.MemoryBytes)/(1<<20))
	}
	if s.PeakMemory > 0 {
		line += fmt.Sprintf(" · peak %.1f MB", float64(s.PeakMemory)/(1<<20))
	}
	if s.Label != "" {
		line += " · " + s.Label
	}
	return line
}

func (t *tools) sessionClose(ctx context.Context, req *mcp.CallToolRequest, in SessionNameInput) (*mcp.CallToolResult, session.Info, error) {
	return t.sessionCall(ctx, in, "closed", func(sx executor.SessionExecutor) (session.Info, error) { return sx.SessionClose(ctx, in.Session) })
}

func (t *tools) sessionReset(ctx context.Context, req *mcp.CallToolRequest, in SessionNameInput) (*mcp.CallToolResult, session.Info, error) {
	return t.sessionCall(ctx, in, "reset", func(sx executor.SessionExecutor) (session.Info, error) { return sx.SessionReset(ctx, in.Session) })
}

func (t *tools) sessionInterrupt(ctx context.Context, req *mcp.CallToolRequest, in SessionNameInput) (*mcp.CallToolResult, session.Info, error) {
	return t.sessionCall(ctx, in, "interrupt", func(sx executor.SessionExecutor) (session.Info, error) { return sx.SessionInterrupt(ctx, in.Session) })
}

func (t *tools) sessionCall(ctx context.Context, in SessionNameInput, what string, call func(executor.SessionExecutor) (session.Info, error)) (*mcp.CallToolResult, session.Info, error) {
	sx, err := t.sessionExecutor()
	if err != nil {
		return nil, session.Info{}, err
	}
	info, err := call(sx)
	if err != nil {
		return nil, session.Info{}, err
	}
	return render(in.Rendering, info, func() string {
		switch what {
		case "closed":
			return fmt.Sprintf("**closed** session `%s` after %d cells · peak memory %.1f MB · CPU %.2f s\n", info.Name, info.ExecutionCount, float64(info.PeakMemory)/(1<<20), info.CPUSeconds)
		case "reset":
			return fmt.Sprintf("**reset** session `%s`: a fresh interpreter (started in %.0f ms), no variables, execution_count 0\n", info.Name, info.StartSeconds*1000)
		}
		if info.Status == session.StatusBusy {
			return fmt.Sprintf("**interrupt sent** to cell %d of session `%s`: the run_python call waiting for it returns with KeyboardInterrupt (or, if the cell ignores it, the session is killed)\n", info.RunningCell, info.Name)
		}
		return fmt.Sprintf("session `%s` is %s: nothing was running, nothing was interrupted\n", info.Name, info.Status)
	}), info, nil
}

func (t *tools) readSessionResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	rest, ok := strings.CutPrefix(uri, "session://")
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	name, history := strings.CutSuffix(rest, "/history")
	name, notebook := strings.CutSuffix(name, "/notebook")
	sx, err := t.sessionExecutor()
	if err != nil {
		return nil, err
	}
	if notebook {
		info, err := sx.SessionGet(ctx, name)
		if se, ok := executor.IsSessionError(err); ok && se.Kind == session.KindNotFound {
			return nil, mcp.ResourceNotFoundError(uri)
		} else if err != nil {
			return nil, err
		}
		h, err := sx.SessionHistory(ctx, name)
		if err != nil {
			return nil, err
		}
		nb, err := session.Notebook(h, info.Python)
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/x-ipynb+json", Text: string(nb)}}}, nil
	}
	var v any
	if history {
		v, err = sx.SessionHistory(ctx, name)
	} else {
		v, err = sx.SessionGet(ctx, name)
	}
	if se, ok := executor.IsSessionError(err); ok && se.Kind == session.KindNotFound {
		return nil, mcp.ResourceNotFoundError(uri)
	} else if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

// SessionExportInput is the input of session_export.
type SessionExportInput struct {
	Session string `json:"session" jsonschema:"The session's name."`
	Path    string `json:"path,omitempty" jsonschema:"Where to write the notebook: a .ipynb path in the workspace, relative to the session's cwd (default: SESSION.ipynb)."`
	Rendering
}

func (t *tools) sessionExport(ctx context.Context, req *mcp.CallToolRequest, in SessionExportInput) (*mcp.CallToolResult, executor.SessionExportResult, error) {
	sx, err := t.sessionExecutor()
	if err != nil {
		return nil, executor.SessionExportResult{}, err
	}
	path := in.Path
	if path == "" {
		path = in.Session + ".ipynb"
	}
	out, err := sx.SessionExport(ctx, in.Session, path)
	if err != nil {
		return nil, executor.SessionExportResult{}, err
	}
	return render(in.Rendering, out, func() string {
		return fmt.Sprintf("**exported** session `%s`: %d cells, %d bytes, to `%s`\n", out.Session, out.Cells, out.Bytes, out.Path)
	}), out, nil
}

package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/jobs"
	"github.com/pyexec/pyexec/internal/present"
)

// DefaultSyncBudget is how long a sync run waits before becoming a job.
const DefaultSyncBudget = jobs.DefaultSyncBudget

// maxWait caps get_job's long-poll so a call stays well inside clients'
// request timeouts.
const maxWait = 120 * time.Second

const jobInstructions = ` Long runs never hang a call: a sync run_python still going after the sync budget returns a job_id with the output so far and keeps running in the background; mode "async" returns a job_id at once. ` +
	`Follow a job with get_job (pass back next_stdout_offset/next_stderr_offset to get only new output; wait=N long-polls), stop it with cancel_job, find jobs with list_jobs, clean up with prune_jobs. ` +
	`Scripts can report progress with: import pyexec_progress; pyexec_progress.report(current, total, "message").`

// JobOptions are run_python's job fields.
type JobOptions struct {
	Mode     string `json:"mode,omitempty" jsonschema:"sync (default): wait for the result, but if the run is still going after the server's sync budget (default 20 s) return a job_id with the output so far and keep it running in the background. async: start a background job and return its job_id at once."`
	JobLabel string `json:"job_label,omitempty" jsonschema:"Label for the background job (list_jobs can filter by it)."`
}

func (o JobOptions) check(jobsEnabled bool) error {
	switch o.Mode {
	case "", "sync":
		return nil
	case "async":
		if !jobsEnabled {
			return errors.New("mode: async needs background jobs, which this server does not offer; use mode sync")
		}
		return nil
	}
	return fmt.Errorf("mode: %q is not a mode; use sync or async", o.Mode)
}

// BatchJobOptions are run_python_batch's job fields.
type BatchJobOptions struct {
	Mode     string `json:"mode,omitempty" jsonschema:"sync (default): run the snippets and return their results. async: start one background job per snippet and return their job_ids at once (results then carry job_id and status instead of output)."`
	JobLabel string `json:"job_label,omitempty" jsonschema:"With mode async: label of the snippets' jobs."`
}

// Handoff is the part of run_python's result that says the run became a
// background job.
type Handoff struct {
	JobID            string `json:"job_id,omitempty" jsonschema:"Set when the run continues as a background job: follow it with get_job, stop it with cancel_job."`
	Status           string `json:"status,omitempty" jsonschema:"Status of the background job (pending or running) when the run was handed off; absent when the result is final."`
	Message          string `json:"message,omitempty" jsonschema:"What happened to the run and how to follow it."`
	NextStdoutOffset int64  `json:"next_stdout_offset,omitempty" jsonschema:"Byte offset of stdout to pass to get_job as stdout_offset to continue after the output returned here."`
	NextStderrOffset int64  `json:"next_stderr_offset,omitempty" jsonschema:"Byte offset of stderr to pass to get_job as stderr_offset."`
}

// GetJobInput is the input of get_job.
type GetJobInput struct {
	JobID        string  `json:"job_id" jsonschema:"The job id returned by run_python."`
	StdoutOffset int64   `json:"stdout_offset,omitempty" jsonschema:"Byte offset in stdout to read from: pass the previous next_stdout_offset to get only new output (default 0: from the start)."`
	StderrOffset int64   `json:"stderr_offset,omitempty" jsonschema:"Byte offset in stderr to read from: pass the previous next_stderr_offset."`
	Wait         float64 `json:"wait,omitempty" jsonschema:"Seconds to wait for new output or for the job to finish when there is nothing new yet (long-poll; at most 120). Default 0: answer at once."`
	MaxBytes     int     `json:"max_bytes,omitempty" jsonschema:"Most bytes of each stream to return (default 262144); read the rest with the next offsets."`
	Rendering
}

// GetJobOutput is the result of get_job.
type GetJobOutput struct {
	jobs.Job
	Stdout           string `json:"stdout" jsonschema:"Standard output after stdout_offset (UTF-8; invalid bytes replaced)."`
	Stderr           string `json:"stderr" jsonschema:"Standard error after stderr_offset."`
	NextStdoutOffset int64  `json:"next_stdout_offset" jsonschema:"Pass as stdout_offset next time to get only newer output."`
	NextStderrOffset int64  `json:"next_stderr_offset" jsonschema:"Pass as stderr_offset next time."`
	OutputDone       bool   `json:"output_done" jsonschema:"True when the job has finished and all its output has been returned."`
}

// JobIDInput is the input of cancel_job.
type JobIDInput struct {
	JobID string `json:"job_id" jsonschema:"The job to cancel."`
	Rendering
}

// ListJobsInput is the input of list_jobs.
type ListJobsInput struct {
	Status string `json:"status,omitempty" jsonschema:"Only jobs with this status: pending, running, completed, failed or cancelled."`
	Label  string `json:"label,omitempty" jsonschema:"Only jobs with exactly this job_label."`
	Limit  int    `json:"limit,omitempty" jsonschema:"Most jobs to return, newest first (default 50)."`
	Rendering
}

// PruneJobsInput is the input of prune_jobs.
type PruneJobsInput struct {
	KeepCompleted bool    `json:"keep_completed,omitempty" jsonschema:"Keep completed jobs (default false: remove them)."`
	KeepFailed    bool    `json:"keep_failed,omitempty" jsonschema:"Keep failed and cancelled jobs (default false: remove them)."`
	MaxAgeHours   float64 `json:"max_age_hours,omitempty" jsonschema:"Only remove jobs that finished more than this many hours ago (default 0: any age). Pending and running jobs are never removed."`
	Rendering
}

// jobTools serves the job tools and resources of an executor with jobs.
type jobTools struct {
	t      *tools
	ex     executor.JobExecutor
	budget time.Duration

	srv *mcp.Server

	mu      sync.Mutex
	subs    map[string]int    // subscribed resource URI -> subscriptions
	watches map[string]*watch // job id -> forwarder of its change events

	cursors statusCursors // py_job_status's incremental reads (compat_real.go)
}

// watch forwards one job's change events while any of its URIs is subscribed.
type watch struct{ cancel func() }

// newJobTools returns nil when ex has no jobs; otherwise it hooks the
// subscription handlers and instructions into sopts (before NewServer).
func newJobTools(t *tools, ex executor.Executor, opts Options, sopts *mcp.ServerOptions) *jobTools {
	jx, ok := ex.(executor.JobExecutor)
	if !ok {
		return nil
	}
	budget := opts.SyncBudget
	if budget == 0 {
		budget = DefaultSyncBudget
	}
	jt := &jobTools{t: t, ex: jx, budget: budget, subs: map[string]int{}, watches: map[string]*watch{}}
	t.jobs = jt
	sopts.Instructions += jobInstructions
	sopts.SubscribeHandler = jt.subscribe
	sopts.UnsubscribeHandler = jt.unsubscribe
	return jt
}

func (jt *jobTools) register(srv *mcp.Server) {
	if jt == nil {
		return
	}
	jt.srv = srv
	addTool(jt.t, srv, &mcp.Tool{
		Name:  "get_job",
		Title: "Get a background job",
		Description: "Status, exit information, script progress and new output of a background job. Output is addressed by byte offsets: " +
			"pass back next_stdout_offset/next_stderr_offset to receive only what is new (nothing is ever returned twice); wait=N long-polls until new output or the end.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, jt.getJob)
	addTool(jt.t, srv, &mcp.Tool{
		Name:        "cancel_job",
		Title:       "Cancel a background job",
		Description: "Stop a pending or running job: its whole process tree is killed and its status becomes cancelled. Output printed so far stays readable with get_job.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, jt.cancelJob)
	addTool(jt.t, srv, &mcp.Tool{
		Name:        "list_jobs",
		Title:       "List background jobs",
		Description: "List background jobs, newest first, optionally filtered by status and label; total counts all matches before the limit.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, jt.listJobs)
	addTool(jt.t, srv, &mcp.Tool{
		Name:        "prune_jobs",
		Title:       "Remove finished jobs",
		Description: "Remove finished jobs and their output logs (completed, failed, cancelled; keep_* and max_age_hours narrow it). Pending and running jobs are never removed.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, jt.pruneJobs)

	for _, tmpl := range []*mcp.ResourceTemplate{
		{Name: "job", Title: "Job status", URITemplate: "job://{id}", MIMEType: "application/json",
			Description: "Status, timestamps, exit information and progress of a background job, as JSON. Subscribe to be notified when it changes."},
		{Name: "job-output", Title: "Job output", URITemplate: "job://{id}/output", MIMEType: "text/plain",
			Description: "Snapshot of a job's output: ---STDOUT--- then ---STDERR---. Subscribe to be notified when it grows."},
		{Name: "job-stream", Title: "Job output (seed alias)", URITemplate: "job-stream://{job_id}", MIMEType: "text/plain",
			Description: "Alias of job://{id}/output, as python-executor-mcp named it."},
	} {
		srv.AddResourceTemplate(tmpl, jt.readResource)
	}
	if _, ok := jt.ex.(executor.JobArtifacts); ok {
		srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "job-artifact", Title: "Job artifact", URITemplate: "job://{id}/artifacts/{name}",
			Description: "Something a job's run displayed (a figure, an image, a table), kept with the job: the image as a blob, or the text form."},
			jt.readArtifact)
	}
}

// readArtifact serves job://ID/artifacts/NAME.
func (jt *jobTools) readArtifact(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	rest, _ := strings.CutPrefix(uri, "job://")
	id, name, ok := strings.Cut(rest, "/artifacts/")
	ax, isAx := jt.ex.(executor.JobArtifacts)
	if !ok || !isAx || id == "" || name == "" || strings.Contains(name, "/") {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	data, mime, err := ax.Artifact(ctx, id, name)
	if errors.Is(err, jobs.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return nil, mcp.ResourceNotFoundError(uri)
	} else if err != nil {
		return nil, err
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: mime}
	if strings.HasPrefix(mime, "text/") {
		c.Text = string(data)
	} else {
		c.Blob = data
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// artifactLinks are resource links to a finished job's displays.
func artifactLinks(j jobs.Job) []*mcp.ResourceLink {
	if j.Run == nil {
		return nil
	}
	var out []*mcp.ResourceLink
	for _, a := range j.Run.Artifacts {
		if a.MIME == "" {
			continue
		}
		size := int64(a.Bytes)
		out = append(out, &mcp.ResourceLink{URI: jobs.ArtifactURI(j.ID, a.Name), Name: a.Name, MIMEType: a.MIME, Size: &size,
			Title: fmt.Sprintf("%s of job %s (%dx%d)", a.Name, j.ID, a.Width, a.Height), Description: "An image the job's run displayed."})
	}
	return out
}

// runPython is run_python when the executor has jobs.
func (jt *jobTools) runPython(ctx context.Context, req *mcp.CallToolRequest, in RunPythonInput) (*mcp.CallToolResult, RunPythonOutput, error) {
	if err := in.JobOptions.check(true); err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	budget, err := jt.t.budget(in.OutputBudget)
	if err != nil {
		return nil, RunPythonOutput{}, err
	}
	if in.Mode == "async" {
		j, err := jt.ex.Start(ctx, in.Request, in.JobLabel)
		if err != nil {
			return nil, RunPythonOutput{}, toolError(err)
		}
		out := RunPythonOutput{Handoff: Handoff{JobID: j.ID, Status: string(j.Status),
			Message: fmt.Sprintf("Started background job %s (%s). Follow it with get_job(job_id=%q, wait=30); stop it with cancel_job.", j.ID, j.Status, j.ID)}}
		return render(in.Rendering, out, func() string { return "**" + out.Message + "**\n" }), out, nil
	}
	o, err := jt.ex.RunOrHandoff(ctx, in.Request, taskSyncOptions(ctx, executor.SyncOptions{Budget: jt.budget, Label: in.JobLabel, OutputBudget: budget}), progressTo(ctx, req))
	if err != nil {
		return nil, RunPythonOutput{}, toolError(err)
	}
	if o.Result != nil {
		r, out := jt.t.presentRun(in, *o.Result, budget)
		return r, out, nil
	}
	ch := o.Output
	so, se, cut := present.CutOutput(ch.Stdout, ch.Stderr, ch.StdoutSize, ch.StderrSize, budget, present.Where{JobID: o.Job.ID})
	out := RunPythonOutput{
		Result: engine.Result{Stdout: so, Stderr: se, StdoutBytes: ch.StdoutSize, StderrBytes: ch.StderrSize},
		Extra:  present.Extra{OutputCut: cut},
		Handoff: Handoff{JobID: o.Job.ID, Status: string(o.Job.Status), NextStdoutOffset: ch.StdoutOffset, NextStderrOffset: ch.StderrOffset,
			Message: fmt.Sprintf("Still running after %s: the run continues as background job %s. Output so far is included; get the rest with get_job(job_id=%q, stdout_offset=%d, stderr_offset=%d, wait=30), or stop it with cancel_job.",
				jt.budget, o.Job.ID, o.Job.ID, ch.StdoutOffset, ch.StderrOffset)},
	}
	return render(in.Rendering, out, func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "**still running** · job `%s` · %s\n\n%s\n", o.Job.ID, o.Job.Status, out.Message)
		writeStream(&b, "stdout so far", so, ch.StdoutOffset, false)
		writeStream(&b, "stderr so far", se, ch.StderrOffset, false)
		return b.String()
	}), out, nil
}

func (jt *jobTools) getJob(ctx context.Context, req *mcp.CallToolRequest, in GetJobInput) (*mcp.CallToolResult, GetJobOutput, error) {
	wait, err := engine.Seconds("wait", in.Wait, 0, maxWait)
	if err != nil {
		return nil, GetJobOutput{}, toolError(err)
	}
	ch, err := jt.ex.Output(ctx, in.JobID, jobs.Cursor{StdoutOffset: in.StdoutOffset, StderrOffset: in.StderrOffset, MaxBytes: in.MaxBytes, Wait: wait})
	if err != nil {
		return nil, GetJobOutput{}, jobError(in.JobID, err)
	}
	j, err := jt.ex.Job(ctx, in.JobID)
	if err != nil {
		return nil, GetJobOutput{}, jobError(in.JobID, err)
	}
	j.Request = nil // the caller sent it; do not echo up to 1 MiB of code on every poll
	out := GetJobOutput{Job: j, Stdout: ch.Stdout, Stderr: ch.Stderr, NextStdoutOffset: ch.StdoutOffset, NextStderrOffset: ch.StderrOffset,
		OutputDone: ch.Done && j.Status.Terminal()}
	res := render(in.Rendering, out, func() string { return renderJob(out) })
	if j.Status.Terminal() {
		for _, l := range artifactLinks(j) {
			res.Content = append(res.Content, l)
		}
	}
	return res, out, nil
}

func (jt *jobTools) cancelJob(ctx context.Context, req *mcp.CallToolRequest, in JobIDInput) (*mcp.CallToolResult, jobs.Job, error) {
	j, stopped, err := cancelJob(ctx, jt.ex, in.JobID)
	if err != nil {
		return nil, jobs.Job{}, toolError(err)
	}
	j.Request = nil
	return render(in.Rendering, j, func() string { return cancelMessage(j, stopped) }), j, nil
}

// cancelJob cancels a job and reports whether this call stopped it (it was
// pending or running before): cancelling a job that had already ended,
// cancelled included, changes nothing and must not say it killed anything.
func cancelJob(ctx context.Context, ex executor.JobExecutor, id string) (jobs.Job, bool, error) {
	before, err := ex.Job(ctx, id)
	if err != nil {
		return jobs.Job{}, false, jobError(id, err)
	}
	if before.Status.Terminal() {
		return before, false, nil
	}
	j, err := ex.Cancel(ctx, id)
	if err != nil {
		return jobs.Job{}, false, jobError(id, err)
	}
	return j, j.Status == jobs.StatusCancelled, nil
}

func cancelMessage(j jobs.Job, stopped bool) string {
	switch {
	case stopped:
		return fmt.Sprintf("Job `%s` is **cancelled**: it was stopped and its whole process tree killed. Output so far: get_job(job_id=%q).\n", j.ID, j.ID)
	case j.Status == jobs.StatusCancelled:
		return fmt.Sprintf("Job `%s` was already **cancelled**; nothing to do. Its output: get_job(job_id=%q).\n", j.ID, j.ID)
	}
	return fmt.Sprintf("Job `%s` had already finished (**%s**); nothing to cancel. Its output: get_job(job_id=%q).\n", j.ID, j.Status, j.ID)
}

func (jt *jobTools) listJobs(ctx context.Context, req *mcp.CallToolRequest, in ListJobsInput) (*mcp.CallToolResult, jobs.JobList, error) {
	if in.Limit < 0 {
		return nil, jobs.JobList{}, &engine.RequestError{Field: "limit", Message: fmt.Sprintf("must be >= 0, got %d", in.Limit)}
	}
	l, err := jt.ex.Jobs(ctx, jobs.Filter{Status: jobs.Status(in.Status), Label: in.Label, Limit: in.Limit})
	if err != nil {
		return nil, jobs.JobList{}, toolError(err)
	}
	return render(in.Rendering, l, func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "%d job(s) match; showing %d, newest first.\n", l.Total, len(l.Jobs))
		for _, j := range l.Jobs {
			b.WriteString("- " + jobLine(j) + "\n")
		}
		return b.String()
	}), l, nil
}

func (jt *jobTools) pruneJobs(ctx context.Context, req *mcp.CallToolRequest, in PruneJobsInput) (*mcp.CallToolResult, jobs.PruneResult, error) {
	r, err := jt.ex.Prune(ctx, jobs.PruneOptions{KeepCompleted: in.KeepCompleted, KeepFailed: in.KeepFailed, MaxAgeHours: in.MaxAgeHours})
	if err != nil {
		return nil, jobs.PruneResult{}, toolError(err)
	}
	return render(in.Rendering, r, func() string {
		return fmt.Sprintf("Removed %d job(s) and their logs; %d remain.\n", r.Removed, r.Remaining)
	}), r, nil
}

func jobError(id string, err error) error {
	if errors.Is(err, jobs.ErrNotFound) {
		return fmt.Errorf("job_id: no job %q (it may have been pruned); list_jobs shows the known jobs", id)
	}
	return toolError(err)
}

func jobLine(j jobs.Job) string {
	s := fmt.Sprintf("`%s` **%s**", j.ID, j.Status)
	if j.Label != "" {
		s += " [" + j.Label + "]"
	}
	if j.ExitCode != nil {
		s += fmt.Sprintf(" · exit code %d", *j.ExitCode)
	}
	if j.TimedOut {
		s += " · timed out"
	}
	s += " · created " + j.CreatedAt.Format(time.RFC3339)
	if j.Progress != nil {
		s += " · progress " + executor.ScriptProgressText(j.Progress)
	}
	if j.Error != "" {
		s += " · " + j.Error
	}
	return s
}

func renderJob(o GetJobOutput) string {
	var b strings.Builder
	b.WriteString(jobLine(o.Job) + "\n")
	if o.OutputDone {
		b.WriteString("\nAll output has been returned.\n")
	} else {
		fmt.Fprintf(&b, "\nNext: get_job(job_id=%q, stdout_offset=%d, stderr_offset=%d, wait=30)\n", o.ID, o.NextStdoutOffset, o.NextStderrOffset)
	}
	writeStream(&b, "new stdout", o.Stdout, int64(len(o.Stdout)), false)
	writeStream(&b, "new stderr", o.Stderr, int64(len(o.Stderr)), false)
	if o.Run != nil && len(o.Run.Artifacts) > 0 && o.Status.Terminal() {
		writeArtifacts(&b, o.ID, o.Run.Artifacts)
	}
	return b.String()
}

// writeArtifacts lists what a finished job's run displayed: images by
// their resource URI (linked in the result), text forms as they are.
func writeArtifacts(b *strings.Builder, id string, as []jobs.Artifact) {
	b.WriteString("\ndisplayed (kept with the job):\n")
	for i, a := range as {
		fmt.Fprintf(b, "%d. ", i+1)
		if a.MIME != "" {
			fmt.Fprintf(b, "[image: %dx%d %s, %s bytes: %s] ", a.Width, a.Height, a.MIME, present.Commas(int64(a.Bytes)), jobs.ArtifactURI(id, a.Name))
		}
		switch t := a.Text; {
		case strings.HasPrefix(t, "|"):
			b.WriteString("\n\n" + t + "\n\n")
		case strings.Contains(t, "\n"):
			b.WriteString("\n")
			present.WriteFenced(b, t)
		default:
			b.WriteString(t + "\n")
		}
	}
}

// Resources.

// resourceJobID returns the job a resource URI names, and whether it is the
// output view.
func resourceJobID(uri string) (id string, output bool, ok bool) {
	if rest, found := strings.CutPrefix(uri, "job-stream://"); found {
		return rest, true, rest != "" && !strings.Contains(rest, "/")
	}
	rest, found := strings.CutPrefix(uri, "job://")
	if !found {
		return "", false, false
	}
	if id, found := strings.CutSuffix(rest, "/output"); found {
		return id, true, id != "" && !strings.Contains(id, "/")
	}
	return rest, false, rest != "" && !strings.Contains(rest, "/")
}

func jobURIs(id string) []string {
	return []string{"job://" + id, "job://" + id + "/output", "job-stream://" + id}
}

// snapshotBytes caps each stream in an output resource read.
const snapshotBytes = 1 << 20

func (jt *jobTools) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, output, ok := resourceJobID(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	j, err := jt.ex.Job(ctx, id)
	if errors.Is(err, jobs.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	} else if err != nil {
		return nil, err
	}
	if !output {
		b, err := json.MarshalIndent(j, "", "  ")
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
	}
	ch, err := jt.ex.Output(ctx, id, jobs.Cursor{MaxBytes: snapshotBytes})
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("---STDOUT---\n" + ch.Stdout)
	if ch.StdoutOffset < ch.StdoutSize {
		fmt.Fprintf(&b, "\n[pyexec: %d more bytes; read them with get_job(stdout_offset=%d)]\n", ch.StdoutSize-ch.StdoutOffset, ch.StdoutOffset)
	}
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	b.WriteString("---STDERR---\n" + ch.Stderr)
	if ch.StderrOffset < ch.StderrSize {
		fmt.Fprintf(&b, "\n[pyexec: %d more bytes; read them with get_job(stderr_offset=%d)]\n", ch.StderrSize-ch.StderrOffset, ch.StderrOffset)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: b.String()}}}, nil
}

// subscribe accepts resources/subscribe for a job URI and makes sure the
// job's change events are forwarded. Why per job rather than one global
// forwarder: forwarders then live only while someone listens and the job
// runs, whatever the number of servers (sessions) built on one executor.
func (jt *jobTools) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	id, _, ok := resourceJobID(uri)
	if !ok {
		return mcp.ResourceNotFoundError(uri)
	}
	if _, err := jt.ex.Job(ctx, id); err != nil {
		if errors.Is(err, jobs.ErrNotFound) {
			return mcp.ResourceNotFoundError(uri)
		}
		return err
	}
	jt.mu.Lock()
	defer jt.mu.Unlock()
	jt.subs[uri]++
	if jt.watches[id] != nil {
		return nil
	}
	events, cancel, err := jt.ex.Subscribe(context.WithoutCancel(ctx), id)
	if err != nil {
		jt.subs[uri]--
		return err
	}
	w := &watch{cancel: cancel}
	jt.watches[id] = w
	go jt.forward(id, w, events)
	return nil
}

func (jt *jobTools) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	jt.mu.Lock()
	defer jt.mu.Unlock()
	if jt.subs[uri]--; jt.subs[uri] <= 0 {
		delete(jt.subs, uri)
	}
	id, _, ok := resourceJobID(uri)
	if !ok {
		return nil
	}
	for _, u := range jobURIs(id) {
		if jt.subs[u] > 0 {
			return nil
		}
	}
	if w := jt.watches[id]; w != nil {
		delete(jt.watches, id)
		w.cancel()
	}
	return nil
}

// forward turns a job's coalesced change events into
// notifications/resources/updated for its subscribed URIs (the SDK delivers
// each to the sessions subscribed to it). It ends with the job or the
// last unsubscribe.
func (jt *jobTools) forward(id string, w *watch, events <-chan jobs.Event) {
	defer func() {
		jt.mu.Lock()
		if jt.watches[id] == w {
			delete(jt.watches, id)
		}
		jt.mu.Unlock()
		w.cancel()
	}()
	for range events {
		for _, uri := range jobURIs(id) {
			jt.mu.Lock()
			n := jt.subs[uri]
			jt.mu.Unlock()
			if n > 0 {
				_ = jt.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
			}
		}
	}
}

// startBatch is run_python_batch in mode async: one job per entry, so a
// busy queue rejects only the entries past its limit.
func (jt *jobTools) startBatch(ctx context.Context, in RunPythonBatchInput, reqs []engine.Request) (*mcp.CallToolResult, executor.BatchResult, error) {
	switch {
	case in.Mode != "async":
		return nil, executor.BatchResult{}, fmt.Errorf("mode: %q is not a mode; use sync or async", in.Mode)
	case jt == nil:
		return nil, executor.BatchResult{}, errors.New("mode: async needs background jobs, which this server does not offer; use mode sync")
	case len(reqs) == 0:
		return nil, executor.BatchResult{}, errors.New("codes: the batch is empty; give at least one snippet")
	case len(reqs) > executor.MaxBatch:
		return nil, executor.BatchResult{}, fmt.Errorf("codes: the batch has %d snippets; the limit is %d", len(reqs), executor.MaxBatch)
	}
	out := executor.BatchResult{Results: make([]executor.BatchItem, len(reqs))}
	for i, r := range reqs {
		item := executor.BatchItem{Index: i}
		if j, err := jt.ex.Start(ctx, r, in.JobLabel); err != nil {
			item.Error = err.Error()
		} else {
			item.JobID, item.Status = j.ID, string(j.Status)
		}
		out.Results[i] = item
	}
	return render(in.Rendering, out, func() string {
		var b strings.Builder
		b.WriteString("Started background jobs (follow each with get_job):\n")
		for _, it := range out.Results {
			if it.Error != "" {
				fmt.Fprintf(&b, "- snippet %d: **rejected**: %s\n", it.Index, it.Error)
			} else {
				fmt.Fprintf(&b, "- snippet %d: job `%s` (%s)\n", it.Index, it.JobID, it.Status)
			}
		}
		return b.String()
	}), out, nil
}

package mcpserver

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/present"
)

// OutputBudget is the per-call field that sets a result's size.
type OutputBudget struct {
	MaxOutputChars int `json:"max_output_chars,omitempty" jsonschema:"Characters this result may carry (default: the server's --max-result-chars, 20000). Lower it to save context, or raise it up to the server's cap. Output over it is cut in the middle (head 30%, tail 70%) with a marker; the full output stays readable as job://ID/output."`
}

func (t *tools) budget(o OutputBudget) (int, error) {
	return present.Budget(o.MaxOutputChars, t.resultChars, t.resultCap)
}

// whereFor says where a result's full output is kept.
func (t *tools) whereFor(r engine.Result) present.Where {
	if r.OutputJobID != "" {
		return present.Where{JobID: r.OutputJobID}
	}
	if t.jobs == nil {
		return present.Where{Note: "the full output was not kept (this server offers no background jobs)"}
	}
	return present.Where{}
}

// encodeView turns a presented run into MCP content: the markdown (or the
// JSON of out), the inline images and links to the full output and to the
// files the run wrote.
func encodeView(r Rendering, v present.View, out any) *mcp.CallToolResult {
	res := render(r, out, func() string { return v.Markdown })
	for _, img := range v.Images {
		res.Content = append(res.Content, &mcp.ImageContent{MIMEType: img.MIME, Data: img.Data})
	}
	for _, l := range v.Links {
		size := l.Size
		res.Content = append(res.Content, &mcp.ResourceLink{URI: l.URI, Name: l.Name, Title: l.Title, MIMEType: l.MIME, Description: l.Description, Size: &size})
	}
	return res
}

// presentRun is run_python's finished result, presented within the budget.
func (t *tools) presentRun(in RunPythonInput, r engine.Result, budget int) (*mcp.CallToolResult, RunPythonOutput) {
	v := present.Run(present.RunInput{Result: r, Where: t.whereFor(r), Code: in.Code, Budget: budget})
	out := RunPythonOutput{Result: v.Result, Extra: v.Extra}
	return encodeView(in.Rendering, v, out), out
}

// presentBatch is a batch's result within one shared budget.
func (t *tools) presentBatch(rend Rendering, reqs []engine.Request, res executor.BatchResult, budget int) (*mcp.CallToolResult, BatchOutput) {
	entries := make([]present.BatchEntry, len(res.Results))
	for i, it := range res.Results {
		entries[i] = present.BatchEntry{Result: it.Result, Where: t.whereFor(it.Result), Rejected: it.Error}
		if i < len(reqs) {
			entries[i].Code = reqs[i].Code
		}
	}
	md, views := present.Batch(entries, budget)
	out := BatchOutput{Results: make([]BatchOutputItem, len(res.Results))}
	all := present.View{Markdown: md}
	for i, it := range res.Results {
		item := BatchOutputItem{BatchItem: it}
		if it.Error == "" {
			item.Result = views[i].Result
			item.Exception = item.Result.Error // the view's, within the budget
			item.Extra = views[i].Extra
			all.Images = append(all.Images, views[i].Images...)
			all.Links = append(all.Links, views[i].Links...)
		}
		out.Results[i] = item
	}
	if len(all.Images) > present.MaxInlineImages {
		all.Images = all.Images[:present.MaxInlineImages]
	}
	return encodeView(rend, all, out), out
}

// BatchOutput is run_python_batch's structured result.
type BatchOutput struct {
	Results []BatchOutputItem `json:"results" jsonschema:"One result per snippet, in input order."`
}

// BatchOutputItem is one entry of a batch result.
type BatchOutputItem struct {
	executor.BatchItem
	present.Extra
}

// unfinishedFields are the exit fields a handed-off run does not have yet.
var unfinishedFields = []string{"exit_code", "success", "timed_out", "elapsed_seconds", "execution_strategy", "python_version_used", "executable", "cpu_user_seconds", "cpu_system_seconds", "peak_rss_bytes"}

// runPythonOutputSchema is RunPythonOutput's schema with the exit fields
// optional: a run handed off to a job has none yet.
func runPythonOutputSchema() *jsonschema.Schema {
	s, err := jsonschema.For[RunPythonOutput](nil)
	if err != nil {
		panic(err)
	}
	s.Required = slices.DeleteFunc(s.Required, func(f string) bool { return slices.Contains(unfinishedFields, f) })
	// error is a session cell's exception or a plain run's (MarshalJSON).
	cell, err1 := jsonschema.For[engine.CellError](nil)
	run, err2 := jsonschema.For[engine.RunError](nil)
	if err1 != nil || err2 != nil {
		panic(fmt.Sprint(err1, err2))
	}
	s.Properties["error"] = &jsonschema.Schema{
		Description: "The exception that ended the run: for a plain run, the uncaught exception ({ename, evalue, traceback: [lines]}); for a session cell, the exception that ended the cell (the session survives it).",
		AnyOf:       []*jsonschema.Schema{run, cell},
	}
	return s
}

// MarshalJSON leaves out the exit fields of a run that has not finished:
// a handed-off run has no exit code yet, and saying 0 would be a lie.
func (o RunPythonOutput) MarshalJSON() ([]byte, error) {
	type plain RunPythonOutput
	b, err := json.Marshal(plain(o))
	// error is a session cell's when there is one, else the run's uncaught
	// exception (both embedded fields are named error; the shallower, the
	// cell's, would hide the run's).
	runErr := o.SessionCell.Error == nil && o.Result.Error != nil
	if err != nil || !runErr && (o.JobID == "" || (o.Status != "running" && o.Status != "pending")) {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	if runErr {
		e, err := json.Marshal(o.Result.Error)
		if err != nil {
			return nil, fmt.Errorf("encode result: %w", err)
		}
		m["error"] = e
	}
	if o.JobID != "" && (o.Status == "running" || o.Status == "pending") {
		for _, k := range unfinishedFields {
			delete(m, k)
		}
	}
	return json.Marshal(m)
}

// MarshalJSON keeps the seed's shape: every field the seed returns, a job
// descriptor included (the embedded RunPythonOutput method alone would
// drop the extra fields).
func (o PyRunOutput) MarshalJSON() ([]byte, error) {
	type run RunPythonOutput // without the method
	return json.Marshal(struct {
		run
		InferredDependencies []string `json:"inferred_dependencies,omitempty"`
		Note                 string   `json:"note,omitempty"`
	}{run(o.RunPythonOutput), o.InferredDependencies, o.Note})
}

// Package imports infers a script's dependencies from its imports, for the
// python-executor-mcp seed's auto_parse_imports and auto_install_deps.
//
// The seed kept a short hand-written standard-library list and mapped
// module names to package names one to one (import yaml -> pip install
// yaml, which is the wrong package). Here the script is parsed with ast by
// the interpreter that will run it, in a confined run through the executor
// (the source is the user's and is never executed; parsing it in a sandbox
// keeps even the parser's view of the file inside the run's rights). The
// standard library is that interpreter's own sys.stdlib_module_names,
// modules it can already import (installed packages, local modules next to
// the script or in its cwd) are skipped, and import names are mapped to the
// distributions that provide them (sklearn -> scikit-learn, cv2 ->
// opencv-python, PIL -> pillow, yaml -> pyyaml, ...).
package imports

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/distname"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
)

//go:embed parse_imports.py
var scanner string

// Result is what inference found.
type Result struct {
	Imports []string // every top-level module imported, in order
	Missing []string // imported modules the interpreter cannot import
	// Added are the distributions to install for Missing, minus those the
	// request already declares. Empty when the script has a PEP 723 block:
	// it declares its dependencies itself.
	Added []string
	// Metadata: the script has a PEP 723 block.
	Metadata bool
}

// Infer scans the source of req (inline code, or its script_path read
// inside the sandbox) with req's interpreter and returns the distributions
// its missing imports need. declared are requirements already asked for
// (explicit or PEP 723); a missing module they provide adds nothing.
func Infer(ctx context.Context, ex executor.Executor, req engine.Request, declared []string) (Result, error) {
	scan := engine.Request{
		Code: scanner, Cwd: req.Cwd, Python: req.Python, PythonVersion: req.PythonVersion, Env: req.Env,
		Sandbox: "strict", Network: "deny", Timeout: 30,
	}
	if req.ScriptPath == "" {
		scan.Stdin = req.Code
	}
	// The scanner opens a script_path relative to its cwd, which is the
	// run's, and looks for local modules there too (".").
	scan.Args = []string{req.ScriptPath, "."}
	res, err := ex.Run(ctx, scan, nil)
	if err != nil {
		return Result{}, err
	}
	var out struct {
		Imports  []string `json:"imports"`
		Missing  []string `json:"missing"`
		Metadata bool     `json:"metadata"`
		Error    string   `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.Stdout)), &out); err != nil {
		return Result{}, fmt.Errorf("auto_parse_imports: the import scan failed (exit code %d): %s", res.ExitCode, lastLine(res.Stderr))
	}
	if out.Error != "" {
		field := "script_content"
		if req.ScriptPath != "" {
			field = "script_path"
		}
		return Result{}, &engine.RequestError{Field: field, Message: "auto_parse_imports: " + out.Error + " (pass auto_parse_imports: false to skip the scan)"}
	}
	r := Result{Imports: out.Imports, Missing: out.Missing, Metadata: out.Metadata}
	if r.Metadata {
		return r, nil
	}
	have := map[string]bool{}
	for _, d := range declared {
		have[normalize(requirementName(d))] = true
	}
	for _, m := range out.Missing {
		dist := Distribution(m)
		if dist == "" || have[normalize(dist)] {
			continue
		}
		have[normalize(dist)] = true
		r.Added = append(r.Added, dist)
	}
	return r, nil
}

// Distribution is the distribution that provides import name mod, or ""
// when none should be installed for it.
func Distribution(mod string) string { return distname.ForImport(mod) }

// requirementName is the distribution name at the start of a PEP 508
// requirement ("pandas>=2; python_version>'3'" -> "pandas").
func requirementName(req string) string {
	req = strings.TrimSpace(req)
	for i, c := range req {
		if !(c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return req[:i]
		}
	}
	return req
}

// normalize is PEP 503's name normalization.
func normalize(name string) string {
	name = strings.ToLower(name)
	return strings.NewReplacer("_", "-", ".", "-").Replace(name)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

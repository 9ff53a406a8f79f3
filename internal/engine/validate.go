package engine

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/uvenv"
)

// The largest request pyexec accepts, field by field. Every front end
// (MCP over stdio or HTTP, REST, the seed's /execute) enforces the same
// numbers here, before anything runs, with an error naming the field and the
// limit; the transports' frame and body limits are derived from them (see
// WireLimit). Larger inputs belong in a workspace file (script_path, or a
// file the script opens).
const (
	MaxStdinBytes      = 1 << 20   // stdin, as text (Config.StdinLimit; `pyexec run` allows more)
	MaxArgBytes        = 128 << 10 // one argument (the kernel's MAX_ARG_STRLEN)
	MaxArgsBytes       = 256 << 10 // all arguments together
	MaxEnvBytes        = 256 << 10 // all env_vars names and values together
	MaxPathBytes       = 4096      // script_path, cwd, env_file, python (PATH_MAX)
	MaxDependencies    = 256       // entries of dependencies
	MaxDependencyBytes = 4096      // one requirement string
	MaxWordBytes       = 64        // python_version, sandbox, network
)

// WireLimit is the largest JSON encoding of one request whose fields are all
// within their limits, with room for JSON escaping (a string full of quotes,
// backslashes or newlines takes up to twice its size on the wire). Request
// bodies and stdio frames above it are refused before they are parsed.
// The result is rounded up to whole MiB (6 MiB with the default 1 MiB code
// limit).
func WireLimit(codeLimit int) int64 {
	fields := int64(codeLimit) + MaxStdinBytes + MaxArgsBytes + MaxEnvBytes + MaxDependencies*MaxDependencyBytes/4 + 4*MaxPathBytes
	const mib = 1 << 20
	return (2*fields + 64<<10 + mib - 1) / mib * mib
}

// maxSeconds is the longest duration time.Duration can hold, in seconds
// (about 292 years): the cap of every "no limit".
var maxSeconds = float64(math.MaxInt64) / float64(time.Second)

// Seconds turns a request's number of seconds into a Duration without ever
// wrapping: negative, NaN and infinite values are rejected naming field, 0
// means def, and anything above limit is limit (limit <= 0: no cap beyond
// what a Duration holds). Every float that becomes a Duration goes through
// here or through SecondsUpTo.
func Seconds(field string, s float64, def, limit time.Duration) (time.Duration, error) {
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return 0, badRequest(field, "must be a finite number of seconds, got %v", s)
	case s < 0:
		return 0, badRequest(field, "must be 0 or more seconds, got %g", s)
	case s == 0:
		return def, nil
	}
	return SecondsUpTo(s, limit), nil
}

// SecondsUpTo converts s (already known to be finite and >= 0) to a
// Duration capped at limit (limit <= 0: capped at the largest Duration).
func SecondsUpTo(s float64, limit time.Duration) time.Duration {
	if math.IsNaN(s) || s <= 0 {
		return 0
	}
	if limit <= 0 || limit.Seconds() > maxSeconds {
		limit = time.Duration(math.MaxInt64)
	}
	if s >= limit.Seconds() {
		return limit
	}
	return time.Duration(s * float64(time.Second))
}

// Validate checks req as Run would, without running anything, writing code
// files or building environments. Front ends that queue a request (jobs)
// use it so a malformed request is rejected at once, naming the field,
// instead of surfacing later as a failed job.
func (e *Engine) Validate(ctx context.Context, req Request) error {
	if err := e.checkFields(&req); err != nil {
		return err
	}
	if err := checkNamedEnv(&req); err != nil {
		return err
	}
	if _, err := e.timeout(req.Timeout); err != nil {
		return err
	}
	if _, err := e.sandboxSettings(&req); err != nil {
		return err
	}
	cwd, err := e.resolveCwd(req.Cwd)
	if err != nil {
		return err
	}
	rights, err := e.readRights(&req, cwd)
	if err != nil {
		return err
	}
	src, field := []byte(req.Code), "code"
	if req.ScriptPath != "" {
		file, err := e.resolveScript(req.ScriptPath, cwd)
		if err != nil {
			return err
		}
		if src, err = e.readWorkspaceFile("script_path", req.ScriptPath, file, rights, maxSourceBytes); err != nil {
			return err
		}
		field = "script_path"
	}
	meta, err := uvenv.ParseScriptMetadata(src)
	if err != nil {
		return badRequest(field, "%v", err)
	}
	if _, err := e.localRequirements(meta.Dependencies, cwd, "the PEP 723 block of "+field+": "); err != nil {
		return err
	}
	if _, err := e.localRequirements(req.Dependencies, cwd, ""); err != nil {
		return err
	}
	if _, _, err := e.chooseInterpreter(ctx, &req, cwd, rights); err != nil {
		return err
	}
	return e.applyRequestEnv(&runEnv{vars: map[string]string{}}, &req, cwd, rights)
}

// checkFields enforces exactly one of code and script_path and every
// field's size and content limits: what can be told from the request alone,
// before the filesystem is looked at.
func (e *Engine) checkFields(req *Request) error {
	if err := e.checkSource(req); err != nil {
		return err
	}
	return checkFieldLimits(*req, e.cfg.StdinLimit)
}

// checkFieldLimits checks the limits of every field but code (whose limit
// is the server's; see Config.CodeLimit): sizes, NUL bytes where the kernel
// cannot carry them, and the timeout's range.
func checkFieldLimits(req Request, stdinLimit int) error {
	if len(req.Stdin) > stdinLimit {
		return badRequest("stdin", "is %s; the limit is %s (put larger input in a workspace file and open it from the script)", FormatBytes(int64(len(req.Stdin))), FormatBytes(int64(stdinLimit)))
	}
	total := 0
	for i, a := range req.Args {
		switch {
		case strings.IndexByte(a, 0) >= 0:
			return badRequest("args", "argument %d contains a NUL byte, which a command line cannot carry", i)
		case len(a) > MaxArgBytes:
			return badRequest("args", "argument %d is %s; the limit is %s per argument", i, FormatBytes(int64(len(a))), FormatBytes(MaxArgBytes))
		}
		total += len(a) + 1
	}
	if total > MaxArgsBytes {
		return badRequest("args", "the arguments take %s; the limit is %s in all", FormatBytes(int64(total)), FormatBytes(MaxArgsBytes))
	}
	total = 0
	for k, v := range req.EnvVars {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return badRequest("env_vars", "invalid variable name %q (it must be non-empty, without '=' or NUL)", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return badRequest("env_vars", "value of %s contains a NUL byte, which an environment cannot carry", k)
		}
		total += len(k) + len(v) + 2
	}
	if total > MaxEnvBytes {
		return badRequest("env_vars", "the variables take %s; the limit is %s in all", FormatBytes(int64(total)), FormatBytes(MaxEnvBytes))
	}
	for _, f := range []struct{ name, v string }{
		{"script_path", req.ScriptPath}, {"cwd", req.Cwd}, {"env_file", req.EnvFile}, {"python", req.Python},
	} {
		if err := checkPath(f.name, f.v); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, v string }{
		{"python_version", req.PythonVersion}, {"sandbox", req.Sandbox}, {"network", req.Network},
	} {
		if len(f.v) > MaxWordBytes || strings.IndexByte(f.v, 0) >= 0 {
			return badRequest(f.name, "%q is not a valid value (at most %d bytes, no NUL)", truncate(f.v, 40), MaxWordBytes)
		}
	}
	if len(req.Dependencies) > MaxDependencies {
		return badRequest("dependencies", "has %d entries; the limit is %d", len(req.Dependencies), MaxDependencies)
	}
	for i, d := range req.Dependencies {
		if len(d) > MaxDependencyBytes {
			return badRequest("dependencies", "entry %d is %s; the limit is %s per requirement", i, FormatBytes(int64(len(d))), FormatBytes(MaxDependencyBytes))
		}
	}
	if _, err := Seconds("timeout", req.Timeout, 0, 0); err != nil {
		return err
	}
	return nil
}

func checkPath(field, p string) error {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return badRequest(field, "contains a NUL byte")
	case len(p) > MaxPathBytes:
		return badRequest(field, "is %d bytes long; the limit is %d", len(p), MaxPathBytes)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// checkSource enforces exactly one of code and script_path, and the code
// size limit.
func (e *Engine) checkSource(req *Request) error {
	switch {
	case req.Code != "" && req.ScriptPath != "":
		return badRequest("code", "give either code or script_path, not both")
	case req.Code == "" && req.ScriptPath == "":
		return badRequest("code", "give one of code (inline source) or script_path (a .py file in the workspace)")
	case len(req.Code) > e.cfg.CodeLimit:
		return badRequest("code", "is %s; the limit is %s (run a larger program from a workspace file with script_path)", FormatBytes(int64(len(req.Code))), FormatBytes(int64(e.cfg.CodeLimit)))
	}
	return nil
}

// timeout applies the default and the server-wide cap.
func (e *Engine) timeout(seconds float64) (time.Duration, error) {
	return Seconds("timeout", seconds, e.cfg.DefaultTimeout, e.cfg.MaxTimeout)
}

// FormatBytes renders a byte count for people and models: "2 GiB",
// "1.5 MiB", "512 bytes" (exact whole units when they fit, else one
// decimal, with the exact count in parentheses).
func FormatBytes(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	units := []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.size {
			if n%u.size == 0 {
				return fmt.Sprintf("%d %s", n/u.size, u.name)
			}
			return fmt.Sprintf("%.1f %s (%d bytes)", float64(n)/float64(u.size), u.name, n)
		}
	}
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

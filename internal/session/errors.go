package session

import (
	"fmt"
	"regexp"

	"github.com/pyexec/pyexec/internal/engine"
)

// Kinds of Error.
const (
	KindNotFound = "not_found" // no session of that name
	KindExists   = "exists"    // session_create of a name in use
	KindBusy     = "busy"      // a cell is running
	KindLimit    = "limit"     // --max-sessions reached
	KindLost     = "lost"      // it ended without being closed (reported once)
)

// Error is a refused session call. Message says what to do about it, in
// words a model can act on.
type Error struct {
	Kind    string `json:"kind"`
	Session string `json:"session,omitempty"`
	Reason  string `json:"lost_reason,omitempty"`
	Job     string `json:"job_id,omitempty"` // busy: the job running the cell
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func checkName(name string) error {
	if !namePattern.MatchString(name) {
		return &engine.RequestError{Field: "session", Message: fmt.Sprintf("%q is not a session name: use 1-64 characters of A-Z a-z 0-9 _ . -", name)}
	}
	return nil
}

// sameSettings refuses a call on an existing session that asks for other
// creation settings, naming the first field that differs. Fields the call
// leaves empty are not compared.
func sameSettings(have, want Settings) error {
	differ := func(field string, a, b any) error {
		return &engine.RequestError{Field: field, Message: fmt.Sprintf("the session was created with %s=%v, this call asks for %v; settings are fixed when a session is created: drop the field, or use a new session name", field, a, b)}
	}
	str := []struct {
		field, a, b string
	}{
		{"python", have.Python, want.Python}, {"env", have.Env, want.Env}, {"python_version", have.PythonVersion, want.PythonVersion},
		{"cwd", have.Cwd, want.Cwd}, {"env_file", have.EnvFile, want.EnvFile},
		{"sandbox", have.Sandbox, want.Sandbox}, {"network", have.Network, want.Network},
	}
	for _, f := range str {
		if f.b != "" && f.a != f.b {
			return differ(f.field, quoteEmpty(f.a), f.b)
		}
	}
	if len(want.EnvVars) > 0 && fmt.Sprint(want.EnvVars) != fmt.Sprint(have.EnvVars) {
		return differ("env_vars", have.EnvVars, want.EnvVars)
	}
	if want.Limits != nil && (have.Limits == nil || *want.Limits != *have.Limits) {
		return differ("limits", fmtLimits(have), *want.Limits)
	}
	return nil
}

func quoteEmpty(s string) string {
	if s == "" {
		return `"" (the default)`
	}
	return s
}

func fmtLimits(s Settings) any {
	if s.Limits == nil {
		return "the server's limits"
	}
	return *s.Limits
}

package didyoumean

import (
	"reflect"
	"slices"
	"testing"
)

func TestClosest(t *testing.T) {
	runPython := []string{"code", "script_path", "args", "stdin", "cwd", "python", "python_version", "env_vars", "env_file", "dependencies", "timeout", "sandbox", "network", "limits", "mode", "job_label", "script_name", "markdown_output"}
	for _, c := range []struct{ name, want string }{
		{"timeout_seconds", "timeout"},
		{"Timeout", "timeout"},
		{"timeout_secs", "timeout"},
		{"script_content", "code"},
		{"directory", "cwd"},
		{"envvars", "env_vars"},
		{"env_var", "env_vars"},
		{"dependecies", "dependencies"},
		{"scriptpath", "script_path"},
		{"packages", "dependencies"},
		{"label", "job_label"},
		{"status_filter", ""}, // run_python has no status
		{"zzzz", ""},
		{"x", ""},
	} {
		if got := Closest(c.name, runPython); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	if got := Closest("status_filter", []string{"status", "label", "limit"}); got != "status" {
		t.Errorf("status_filter -> %q", got)
	}
}

func TestJSONFields(t *testing.T) {
	type inner struct {
		A string `json:"a,omitempty"`
		B int    `json:"-"`
	}
	type outer struct {
		inner
		C bool `json:"c"`
		d int
	}
	if got := JSONFields(reflect.TypeFor[outer]()); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("JSONFields = %v", got)
	}
}

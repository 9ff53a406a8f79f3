// Package didyoumean suggests the field a caller most likely meant when it
// sent one that does not exist ("timeout_seconds" on a tool that takes
// "timeout"), so a rejected request says what to send instead. MCP tool
// errors and REST 400s use the same suggestions.
package didyoumean

import (
	"reflect"
	"strings"
)

// aliases are names other Python-execution tools (the seeds, hosted code
// interpreters) use for pyexec's fields. A suggestion is only made when the
// target exists among the candidates.
var aliases = map[string][]string{
	"timeout_seconds": {"timeout"},
	"timeout_sec":     {"timeout"},
	"time_limit":      {"timeout"},
	"script_content":  {"code"},
	"source":          {"code", "script_path"},
	"script":          {"code", "script_path"},
	"file":            {"script_path"},
	"path":            {"script_path"},
	"filename":        {"script_path"},
	"directory":       {"cwd"},
	"dir":             {"cwd"},
	"working_dir":     {"cwd"},
	"workdir":         {"cwd"},
	"env":             {"env_vars"},
	"environment":     {"env_vars"},
	"packages":        {"dependencies"},
	"requirements":    {"dependencies"},
	"deps":            {"dependencies"},
	"interpreter":     {"python"},
	"version":         {"python_version"},
	"label":           {"job_label"},
	"input":           {"stdin"},
	"argv":            {"args"},
	"arguments":       {"args"},
	"status_filter":   {"status"},
	"id":              {"job_id"},
	"offset":          {"stdout_offset"},
	"snippets":        {"codes"},
	"workers":         {"max_workers"},
}

// Closest returns the candidate name most likely meant by name, or "" when
// none is close enough to suggest.
func Closest(name string, candidates []string) string {
	has := make(map[string]bool, len(candidates))
	for _, c := range candidates {
		has[c] = true
	}
	lower := strings.ToLower(name)
	if has[lower] {
		return lower // only the case differed
	}
	for _, a := range aliases[lower] {
		if has[a] {
			return a
		}
	}
	squash := func(s string) string { return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s)) }
	best, bestDist := "", -1
	for _, c := range candidates {
		n, cs := squash(name), squash(c)
		d := distance(n, cs)
		// One name containing the other ("timeout" in "timeoutsecs") is
		// as good as a short edit.
		if len(cs) >= 3 && len(n) >= 3 && (strings.Contains(n, cs) || strings.Contains(cs, n)) {
			d = min(d, 1)
		}
		if d <= max(2, len(cs)/3) && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// Hint is ` (did you mean "x"?)` for the closest candidate, or "".
func Hint(name string, candidates []string) string {
	if c := Closest(name, candidates); c != "" {
		return ` (did you mean "` + c + `"?)`
	}
	return ""
}

// JSONFields lists the JSON field names of struct type t, including those of
// embedded structs (as encoding/json flattens them).
func JSONFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			out = append(out, JSONFields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// distance is the Levenshtein edit distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

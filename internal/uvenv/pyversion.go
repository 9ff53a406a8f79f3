package uvenv

import (
	"fmt"
	"strconv"
	"strings"
)

// SatisfiesPython reports whether the interpreter version (like "3.11.7")
// matches a requires-python specifier (like ">=3.9,<3.13" or "~=3.10" or
// "==3.11.*"). It implements the PEP 440 comparison operators on release
// segments, which is what requires-python uses in practice; pre-release
// suffixes are ignored. An empty specifier matches everything.
//
// The engine uses it to pick an installed interpreter for a PEP 723 script,
// as `uv run` does, instead of failing late inside uv.
func SatisfiesPython(version, spec string) (bool, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return true, nil
	}
	v, err := parseRelease(version)
	if err != nil {
		return false, fmt.Errorf("python version %q: %w", version, err)
	}
	for _, clause := range strings.Split(spec, ",") {
		clause = strings.Join(strings.Fields(clause), "")
		if clause == "" {
			continue
		}
		ok, err := matchClause(v, clause)
		if err != nil {
			return false, fmt.Errorf("requires-python %q: %w", spec, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

func matchClause(v []int, clause string) (bool, error) {
	op := ""
	for _, o := range []string{"===", "~=", "==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(clause, o) {
			op = o
			break
		}
	}
	if op == "" {
		return false, fmt.Errorf("clause %q has no comparison operator", clause)
	}
	text := clause[len(op):]
	if op == "===" {
		return joinRelease(v) == text, nil
	}
	wildcard := strings.HasSuffix(text, ".*")
	if wildcard {
		if op != "==" && op != "!=" {
			return false, fmt.Errorf("clause %q: '.*' is only allowed with == and !=", clause)
		}
		text = strings.TrimSuffix(text, ".*")
	}
	want, err := parseRelease(text)
	if err != nil {
		return false, fmt.Errorf("clause %q: %w", clause, err)
	}
	switch op {
	case "==", "!=":
		var eq bool
		if wildcard {
			eq = prefixEqual(v, want)
		} else {
			eq = compareRelease(v, want) == 0
		}
		return eq == (op == "=="), nil
	case "<=":
		return compareRelease(v, want) <= 0, nil
	case ">=":
		return compareRelease(v, want) >= 0, nil
	case "<":
		return compareRelease(v, want) < 0, nil
	case ">":
		return compareRelease(v, want) > 0, nil
	case "~=":
		if len(want) < 2 {
			return false, fmt.Errorf("clause %q: ~= needs at least two release segments", clause)
		}
		return compareRelease(v, want) >= 0 && prefixEqual(v, want[:len(want)-1]), nil
	}
	return false, fmt.Errorf("clause %q: unsupported operator", clause)
}

// parseRelease parses the release segments of a version ("3.11.7rc1" ->
// [3 11 7]); an optional "v" prefix and a suffix after the digits are dropped.
func parseRelease(s string) ([]int, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	var out []int
	for _, part := range strings.Split(s, ".") {
		digits := part
		if i := strings.IndexFunc(part, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
			digits = part[:i]
		}
		if digits == "" {
			if len(out) > 0 {
				break // "3.12.0rc1" style tails, or "3.12.dev0"
			}
			return nil, fmt.Errorf("not a version: %q", s)
		}
		n, err := strconv.Atoi(digits)
		if err != nil {
			return nil, fmt.Errorf("not a version: %q", s)
		}
		out = append(out, n)
		if digits != part {
			break
		}
	}
	return out, nil
}

func compareRelease(a, b []int) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		x, y := segment(a, i), segment(b, i)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

func prefixEqual(v, prefix []int) bool {
	for i := range prefix {
		if segment(v, i) != prefix[i] {
			return false
		}
	}
	return true
}

func segment(v []int, i int) int {
	if i < len(v) {
		return v[i]
	}
	return 0
}

func joinRelease(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ".")
}

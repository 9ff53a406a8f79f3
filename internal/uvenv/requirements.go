package uvenv

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// namePattern is PEP 508's distribution name: ASCII letters and digits, with
// '.', '-' and '_' allowed inside. Requiring an alphanumeric first character
// also guarantees that no requirement can be mistaken for a uv command-line
// option (a "dependency" like "--index-url=http://evil" is rejected).
var namePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

var separatorRun = regexp.MustCompile(`[-_.]+`)

// NormalizeName returns the PEP 503 normalized form of a distribution name:
// lower case, with every run of '-', '_' and '.' replaced by a single '-'.
// "Foo.Bar_baz" and "foo-bar-baz" name the same project.
func NormalizeName(name string) string {
	return strings.ToLower(separatorRun.ReplaceAllString(name, "-"))
}

// Requirement is one parsed PEP 508 requirement, enough of it to normalize:
// the name, extras, and the rest kept as text (version specifiers, a URL, a
// marker), since uv does the real interpretation.
type Requirement struct {
	Name   string   // normalized (PEP 503)
	Extras []string // normalized and sorted
	Spec   string   // version specifiers without whitespace, e.g. ">=1.0,<2"
	URL    string   // for "name @ url" requirements
	Marker string   // environment marker after ';', whitespace collapsed
}

// String renders the requirement in its canonical form, which is what the
// cache key hashes and what is passed to uv.
func (r Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Name)
	if len(r.Extras) > 0 {
		b.WriteString("[" + strings.Join(r.Extras, ",") + "]")
	}
	if r.URL != "" {
		b.WriteString(" @ " + r.URL)
		if r.Marker != "" {
			b.WriteString(" ") // PEP 508: a URL must be followed by whitespace before ';'
		}
	} else {
		b.WriteString(r.Spec)
	}
	if r.Marker != "" {
		b.WriteString("; " + r.Marker)
	}
	return b.String()
}

// ParseRequirement parses and validates one PEP 508 requirement string.
func ParseRequirement(s string) (Requirement, error) {
	orig := s
	if strings.ContainsAny(s, "\r\n\x00") {
		return Requirement{}, fmt.Errorf("invalid requirement %q: must be a single line", orig)
	}
	s = strings.TrimSpace(s)
	var r Requirement
	if i := markerIndex(s); i >= 0 {
		r.Marker = collapseSpaces(strings.TrimSpace(s[i+1:]))
		s = strings.TrimSpace(s[:i])
		if r.Marker == "" {
			return Requirement{}, fmt.Errorf("invalid requirement %q: empty marker after ';'", orig)
		}
	}
	// The name runs until the first character that cannot be part of it.
	end := strings.IndexFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	})
	if end < 0 {
		end = len(s)
	}
	name := s[:end]
	if !namePattern.MatchString(name) {
		return Requirement{}, fmt.Errorf("invalid requirement %q: a PEP 508 requirement starts with a package name (letters, digits, '.', '-', '_'), like \"requests>=2\"", orig)
	}
	r.Name = NormalizeName(name)
	rest := strings.TrimSpace(s[end:])
	if strings.HasPrefix(rest, "[") {
		close := strings.IndexByte(rest, ']')
		if close < 0 {
			return Requirement{}, fmt.Errorf("invalid requirement %q: unclosed '[' in extras", orig)
		}
		for _, e := range strings.Split(rest[1:close], ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			if !namePattern.MatchString(e) {
				return Requirement{}, fmt.Errorf("invalid requirement %q: bad extra %q", orig, e)
			}
			r.Extras = append(r.Extras, NormalizeName(e))
		}
		sort.Strings(r.Extras)
		r.Extras = dedup(r.Extras)
		rest = strings.TrimSpace(rest[close+1:])
	}
	switch {
	case rest == "":
	case strings.HasPrefix(rest, "@"):
		r.URL = strings.TrimSpace(rest[1:])
		if r.URL == "" || strings.ContainsAny(r.URL, " \t") {
			return Requirement{}, fmt.Errorf("invalid requirement %q: bad URL after '@'", orig)
		}
	default:
		spec := strings.Join(strings.Fields(rest), "")
		if strings.HasPrefix(spec, "(") && strings.HasSuffix(spec, ")") {
			spec = spec[1 : len(spec)-1]
		}
		for _, clause := range strings.Split(spec, ",") {
			if !strings.ContainsAny(clause[:min(len(clause), 1)], "<>=!~") {
				return Requirement{}, fmt.Errorf("invalid requirement %q: %q is not a version specifier (like >=1.0 or ==2.*)", orig, clause)
			}
		}
		r.Spec = spec
	}
	return r, nil
}

// markerIndex finds the ';' that starts an environment marker, ignoring any
// inside a URL (where ';' may appear in the path) unless it follows a space.
func markerIndex(s string) int {
	if at := strings.IndexByte(s, '@'); at >= 0 {
		if i := strings.Index(s[at:], " ;"); i >= 0 {
			return at + i + 1
		}
		return -1
	}
	return strings.IndexByte(s, ';')
}

// collapseSpaces collapses whitespace runs outside quotes to one space, so
// `python_version  >= "3.8"` and `python_version >= "3.8"` hash alike.
func collapseSpaces(s string) string {
	var b strings.Builder
	var quote rune
	space := false
	for _, c := range s {
		if quote == 0 && (c == ' ' || c == '\t') {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		if quote == 0 && (c == '\'' || c == '"') {
			quote = c
		} else if c == quote {
			quote = 0
		}
		b.WriteRune(c)
	}
	return b.String()
}

// NormalizeRequirements parses, canonicalizes, sorts and de-duplicates a
// requirement list, so that equivalent lists produce the same cache key.
func NormalizeRequirements(reqs []string) ([]string, error) {
	out := make([]string, 0, len(reqs))
	for _, s := range reqs {
		if strings.TrimSpace(s) == "" {
			continue
		}
		r, err := ParseRequirement(s)
		if err != nil {
			return nil, err
		}
		out = append(out, r.String())
	}
	sort.Strings(out)
	return dedup(out), nil
}

func dedup(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

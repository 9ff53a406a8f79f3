package engine

import (
	"fmt"
	"regexp"
	"strings"
)

// parseDotenv reads a .env file the way python-dotenv does: `KEY=value`
// lines with optional `export `, `#` comments, single quotes (literal),
// double quotes (escapes, may span lines), unquoted values (trimmed, inline
// ` #` comments dropped), and `${VAR}` / `${VAR:-default}` expansion in
// unquoted and double-quoted values.
//
// It is written here rather than taken from godotenv because godotenv
// expands only upper-case names and only against the file itself; scripts
// expect `${HOME}` to expand against the environment the run will have, not
// against the server's, which lookup provides.
func parseDotenv(src string, lookup func(string) (string, bool)) ([]envPair, error) {
	var out []envPair
	defined := map[string]string{}
	get := func(name string) (string, bool) {
		if v, ok := defined[name]; ok {
			return v, true
		}
		return lookup(name)
	}
	s := strings.ReplaceAll(src, "\r\n", "\n")
	line := 1
	for len(s) > 0 {
		// Skip blank lines and comments.
		trimmed := strings.TrimLeft(s, " \t")
		if trimmed == "" {
			break
		}
		if trimmed[0] == '\n' {
			s = trimmed[1:]
			line++
			continue
		}
		if trimmed[0] == '#' {
			s, line = skipLine(trimmed, line)
			continue
		}
		s = trimmed
		if rest, ok := strings.CutPrefix(s, "export "); ok {
			s = strings.TrimLeft(rest, " \t")
		}
		end := strings.IndexAny(s, "=\n")
		if end < 0 || s[end] == '\n' {
			// A bare KEY without '=' has no value (python-dotenv: None): skip.
			s, line = skipLine(s, line)
			continue
		}
		key := strings.TrimSpace(s[:end])
		if !validEnvName(key) {
			return nil, fmt.Errorf("line %d: invalid variable name %q", line, key)
		}
		s = strings.TrimLeft(s[end+1:], " \t")
		var value string
		switch {
		case strings.HasPrefix(s, "'"):
			close := strings.IndexByte(s[1:], '\'')
			if close < 0 {
				return nil, fmt.Errorf("line %d: unterminated single quote in %s", line, key)
			}
			value = s[1 : 1+close]
			line += strings.Count(value, "\n")
			s, line = skipLine(s[2+close:], line)
		case strings.HasPrefix(s, `"`):
			raw, n, err := scanDoubleQuoted(s[1:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %s in %s", line, err, key)
			}
			line += strings.Count(s[1:1+n], "\n")
			value = expandVars(raw, get)
			s, line = skipLine(s[1+n:], line)
		default:
			nl := strings.IndexByte(s, '\n')
			if nl < 0 {
				nl = len(s)
			}
			v := s[:nl]
			if i := strings.Index(v, " #"); i >= 0 {
				v = v[:i]
			}
			value = expandVars(strings.TrimSpace(v), get)
			s, line = skipLine(s, line)
		}
		defined[key] = value
		out = append(out, envPair{key, value})
	}
	return out, nil
}

type envPair struct{ key, value string }

// skipLine drops the rest of the current line, newline included.
func skipLine(s string, line int) (string, int) {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[i+1:], line + 1
	}
	return "", line
}

// scanDoubleQuoted decodes a double-quoted value up to its closing quote and
// returns the decoded text and how many bytes of s (closing quote included)
// were consumed.
func scanDoubleQuoted(s string) (string, int, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), i + 1, nil
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '"', '\\', '\'':
				b.WriteByte(s[i])
			case '$':
				b.WriteString(`\$`) // keeps a literal $ through expansion
			default:
				b.WriteByte('\\')
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated double quote")
}

var expandRe = regexp.MustCompile(`\\?\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\\\$`)

func expandVars(v string, get func(string) (string, bool)) string {
	return expandRe.ReplaceAllStringFunc(v, func(m string) string {
		if m == `\$` {
			return "$"
		}
		if strings.HasPrefix(m, `\`) {
			return m[1:]
		}
		sub := expandRe.FindStringSubmatch(m)
		if val, ok := get(sub[1]); ok && val != "" {
			return val
		}
		return sub[2]
	})
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9') || (i > 0 && c == '.') {
			continue
		}
		return false
	}
	return true
}

package scripts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// Metadata is the part of a PEP 723 "script" block the store shows.
type Metadata struct {
	Dependencies   []string `json:"dependencies,omitempty" toml:"dependencies"`
	RequiresPython string   `json:"requires_python,omitempty" toml:"requires-python"`
}

// blockPattern is the reference regular expression of PEP 723 in RE2 syntax.
var blockPattern = regexp.MustCompile(`(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$`)

// readMetadata returns the script block's metadata, whether there is one,
// and an error when the block is malformed (the store still lists the
// script; it just cannot show its dependencies).
func readMetadata(src string) (Metadata, bool, error) {
	if !strings.Contains(src, "# /// script") {
		return Metadata{}, false, nil
	}
	text := strings.ReplaceAll(src, "\r\n", "\n")
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	for _, m := range blockPattern.FindAllStringSubmatch(text, -1) {
		if m[1] != "script" {
			continue
		}
		var b strings.Builder
		for _, line := range strings.SplitAfter(m[2], "\n") {
			switch {
			case strings.HasPrefix(line, "# "):
				b.WriteString(line[2:])
			case strings.HasPrefix(line, "#"):
				b.WriteString(line[1:])
			}
		}
		var md Metadata
		if _, err := toml.Decode(b.String(), &md); err != nil {
			return Metadata{}, true, fmt.Errorf("the # /// script block is not valid TOML: %w", err)
		}
		return md, true, nil
	}
	return Metadata{}, false, fmt.Errorf("a # /// script block is opened but not closed by a # /// line")
}

// withHeader returns code with a PEP 723 block declaring md, placed after a
// shebang line if there is one. Strings are written as TOML basic strings
// (JSON string syntax is a subset of them once HTML escaping is off).
func withHeader(code string, md Metadata) (string, error) {
	if len(md.Dependencies) == 0 && md.RequiresPython == "" {
		return code, nil
	}
	var b strings.Builder
	b.WriteString("# /// script\n")
	if md.RequiresPython != "" {
		fmt.Fprintf(&b, "# requires-python = %s\n", tomlString(md.RequiresPython))
	}
	if len(md.Dependencies) > 0 {
		b.WriteString("# dependencies = [\n")
		for _, d := range md.Dependencies {
			fmt.Fprintf(&b, "#     %s,\n", tomlString(d))
		}
		b.WriteString("# ]\n")
	}
	b.WriteString("# ///\n")
	if strings.HasPrefix(code, "#!") {
		shebang, rest, _ := strings.Cut(code, "\n")
		return shebang + "\n" + b.String() + rest, nil
	}
	return b.String() + code, nil
}

func tomlString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(buf.String(), "\n")
}

// docLine returns the first line of the module docstring: the first
// statement after comments and blank lines, when it is a string literal.
func docLine(src string) string {
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		// Optional string prefix (r, u; f-strings are not docstrings).
		body := strings.TrimLeft(t, "rRuU")
		if len(t)-len(body) > 1 {
			return ""
		}
		for _, q := range []string{`"""`, `'''`, `"`, `'`} {
			if !strings.HasPrefix(body, q) {
				continue
			}
			rest := strings.TrimSpace(body[len(q):])
			if rest == "" && len(q) == 3 && i+1 < len(lines) {
				// The text starts on the line after the opening quotes.
				rest = strings.TrimSpace(lines[i+1])
			}
			if j := strings.Index(rest, q); j >= 0 {
				rest = rest[:j]
			}
			return strings.TrimSpace(rest)
		}
		return ""
	}
	return ""
}

package uvenv

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// ScriptMetadata is the PEP 723 "script" block of a Python file.
type ScriptMetadata struct {
	// Found reports whether the source has a "# /// script" block at all.
	Found bool
	// Dependencies are the block's PEP 508 requirements, as written.
	Dependencies []string
	// RequiresPython is the block's requires-python specifier, if any.
	RequiresPython string
}

// blockPattern is the reference regular expression of PEP 723, verbatim in
// RE2 syntax: a "# /// TYPE" line, comment lines, and a closing "# ///" line.
// openPattern is a "# /// script" opening line.
var openPattern = regexp.MustCompile(`(?m)^# /// script$`)

var blockPattern = regexp.MustCompile(`(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$`)

// scriptTable is the TOML of a script block. Unknown keys (tool tables) are
// allowed by PEP 723 and ignored here.
type scriptTable struct {
	Dependencies   []string `toml:"dependencies"`
	RequiresPython string   `toml:"requires-python"`
}

// ParseScriptMetadata extracts PEP 723 inline metadata from Python source.
// No block is not an error (Found is false); two "script" blocks, invalid
// TOML, or an invalid requirement are, and the error says where to look.
func ParseScriptMetadata(src []byte) (ScriptMetadata, error) {
	text := string(src)
	if !strings.Contains(text, "# /// ") {
		return ScriptMetadata{}, nil // fast path: most code has no block
	}
	text = strings.ReplaceAll(text, "\r\n", "\n")
	if !strings.HasSuffix(text, "\n") {
		text += "\n" // the pattern needs the closing line's newline (\s)
	}
	var content string
	found := 0
	for _, m := range blockPattern.FindAllStringSubmatch(text, -1) {
		if m[1] != "script" {
			continue
		}
		found++
		content = m[2]
	}
	if found == 0 {
		if openPattern.MatchString(text) { // an opening line of its own, not the text anywhere
			return ScriptMetadata{}, fmt.Errorf("PEP 723 metadata: a \"# /// script\" block was opened but not closed by a \"# ///\" line (every line in between must start with \"#\")")
		}
		return ScriptMetadata{}, nil
	}
	if found > 1 {
		return ScriptMetadata{}, fmt.Errorf("PEP 723 metadata: %d \"# /// script\" blocks found; at most one is allowed", found)
	}
	var lines []string
	for _, line := range strings.SplitAfter(content, "\n") {
		switch {
		case strings.HasPrefix(line, "# "):
			lines = append(lines, line[2:])
		case strings.HasPrefix(line, "#"):
			lines = append(lines, line[1:])
		}
	}
	var t scriptTable
	if _, err := toml.Decode(strings.Join(lines, ""), &t); err != nil {
		return ScriptMetadata{}, fmt.Errorf("PEP 723 metadata: the \"# /// script\" block is not valid TOML: %w", err)
	}
	for _, d := range t.Dependencies {
		if _, err := ParseRequirement(d); err != nil {
			return ScriptMetadata{}, fmt.Errorf("PEP 723 metadata: dependencies: %w", err)
		}
	}
	return ScriptMetadata{Found: true, Dependencies: t.Dependencies, RequiresPython: strings.TrimSpace(t.RequiresPython)}, nil
}

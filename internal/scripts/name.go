package scripts

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxNameLen bounds script names so they stay readable file names.
const MaxNameLen = 64

// namePattern allows what is safe as a file name everywhere: letters, digits,
// '_', '-', '.', starting with a letter, digit or '_' (no hidden files, no
// option-looking names). Separators, "..", spaces and control characters can
// therefore never reach a path.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// CanonicalName validates a script name and returns it without a trailing
// ".py" (callers may give either). The error says what is allowed.
func CanonicalName(name string) (string, error) {
	n := strings.TrimSuffix(name, ".py")
	switch {
	case n == "":
		return "", fmt.Errorf("name is empty; use letters, digits, '_', '-' and '.'")
	case len(n) > MaxNameLen:
		return "", fmt.Errorf("name %q is %d characters; the limit is %d", name, len(n), MaxNameLen)
	case strings.ContainsAny(n, `/\`):
		return "", fmt.Errorf("name %q contains a path separator; give a bare name like \"fetch_prices\"", name)
	case strings.Contains(n, ".."):
		return "", fmt.Errorf("name %q contains \"..\"", name)
	case strings.HasSuffix(n, ".json"):
		return "", fmt.Errorf("name %q must not end in .json", name)
	case !namePattern.MatchString(n):
		return "", fmt.Errorf("name %q has characters that are not allowed; use letters, digits, '_', '-' and '.', starting with a letter, digit or '_'", name)
	}
	return n, nil
}

package engine

import (
	"fmt"
	"strings"
)

// RequestError rejects a request before anything runs. It names the field so
// front ends can say what to change (MCP: a tool error; REST: a 400 body with
// the field).
type RequestError struct {
	Field   string
	Message string
}

func (e *RequestError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// badRequest builds a RequestError. A message that already starts with the
// field's name, or with the name of the package that produced it (errors
// wrapped with %v from package sandbox say "sandbox: ..."), loses that
// prefix, so no error ever reads "sandbox: sandbox: ...".
func badRequest(field, format string, args ...any) error {
	return &RequestError{Field: field, Message: trimPrefixes(fmt.Sprintf(format, args...), field)}
}

// trimPrefixes drops leading "field: " and "sandbox: " prefixes.
func trimPrefixes(msg, field string) string {
	for {
		switch {
		case field != "" && strings.HasPrefix(msg, field+": "):
			msg = msg[len(field)+2:]
		case strings.HasPrefix(msg, "sandbox: "):
			msg = msg[len("sandbox: "):]
		default:
			return msg
		}
	}
}

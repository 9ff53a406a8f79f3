package engine

import "fmt"

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

func badRequest(field, format string, args ...any) error {
	return &RequestError{Field: field, Message: fmt.Sprintf(format, args...)}
}

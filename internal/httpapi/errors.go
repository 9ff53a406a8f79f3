package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
)

// Error codes of the REST API. Each maps to one HTTP status; the client maps
// them back (invalid_request becomes an *engine.RequestError again, so a
// rejected request reads the same whether the executor is local or remote).
const (
	CodeInvalidRequest   = "invalid_request"        // 400
	CodeUnauthorized     = "unauthorized"           // 401
	CodeForbidden        = "forbidden"              // 403
	CodeNotFound         = "not_found"              // 404
	CodeMethodNotAllowed = "method_not_allowed"     // 405
	CodeConflict         = "conflict"               // 409
	CodePayloadTooLarge  = "payload_too_large"      // 413
	CodeUnsupportedMedia = "unsupported_media_type" // 415
	CodeBusy             = "busy"                   // 429
	CodeInternal         = "internal"               // 500
	CodeUnavailable      = "unavailable"            // 503
	CodeStorageFull      = "storage_full"           // 507
)

// ErrorBody is every error response: {"error": {"code", "message", "field"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error" jsonschema:"What went wrong."`
}

// ErrorDetail says what went wrong and, for a rejected request, which field
// to change.
type ErrorDetail struct {
	Code    string `json:"code" jsonschema:"Machine-readable error code: invalid_request, unauthorized, forbidden, not_found, method_not_allowed, conflict, payload_too_large, unsupported_media_type, busy, internal, unavailable, storage_full."`
	Message string `json:"message" jsonschema:"Human-readable explanation saying what to change."`
	Field   string `json:"field,omitempty" jsonschema:"The request field that was rejected, when one was."`
	// For a refused session call: why (see package session).
	SessionError string `json:"session_error,omitempty" jsonschema:"For a refused session call: not_found, exists, busy, limit or lost."`
	LostReason   string `json:"lost_reason,omitempty" jsonschema:"For a lost session: why it ended (timeout, memory, killed, ...)."`
}

// apiError is an error with its HTTP status and wire form.
type apiError struct {
	Status int
	Detail ErrorDetail
}

func (e *apiError) Error() string { return e.Detail.Message }

func newAPIError(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Detail: ErrorDetail{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// errBusy is returned by the admission limit when too many runs are in
// flight.
var errBusy = errors.New("busy")

// BusyError says the server is at its concurrent-run limit.
type BusyError struct{ Limit int }

func (e *BusyError) Error() string {
	return fmt.Sprintf("server busy: %d runs already in flight (the limit); retry shortly", e.Limit)
}

func (e *BusyError) Is(target error) bool { return target == errBusy }

// toAPIError classifies an error from the executor or from decoding.
func toAPIError(err error) *apiError {
	var ae *apiError
	var re *engine.RequestError
	var mbe *http.MaxBytesError
	var be *BusyError
	var bbe *BodyBudgetError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &re):
		return &apiError{Status: http.StatusBadRequest, Detail: ErrorDetail{Code: CodeInvalidRequest, Message: re.Message, Field: re.Field}}
	case errors.As(err, &mbe):
		return newAPIError(http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
			"request body exceeds the %s limit of this route (the largest request: inline code %s, stdin %s, args and env_vars %s each; a batch body up to %s; see GET /v1/info). Put large data in a workspace file and pass its path",
			engine.FormatBytes(mbe.Limit), engine.FormatBytes(engine.DefaultCodeLimit), engine.FormatBytes(engine.MaxStdinBytes), engine.FormatBytes(engine.MaxArgsBytes), engine.FormatBytes(executor.BatchWireLimit(engine.DefaultCodeLimit)))
	case errors.As(err, &bbe):
		return newAPIError(http.StatusTooManyRequests, CodeBusy, "%s", bbe.Error())
	case errors.As(err, &be):
		return newAPIError(http.StatusTooManyRequests, CodeBusy, "%s", be.Error())
	}
	if ae := jobErrorStatus(err); ae != nil {
		return ae
	}
	if ae := sessionErrorStatus(err); ae != nil {
		return ae
	}
	if ae := scriptErrorStatus(err); ae != nil {
		return ae
	}
	return newAPIError(http.StatusInternalServerError, CodeInternal, "%v", err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	if ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pyexec"`)
	}
	writeJSON(w, ae.Status, ErrorBody{Error: ae.Detail})
}

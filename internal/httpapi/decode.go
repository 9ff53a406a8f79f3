package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/pyexec/pyexec/internal/didyoumean"
)

// Request bodies are decoded as a stream, one top-level field at a time,
// and an array of objects (a batch's requests) one element at a time. Why
// not json.Decoder.Decode of the whole body: the decoder buffers an entire
// value before it unmarshals it, so a 20 MB batch cost its 20 MB of JSON
// (in a buffer grown by doubling, up to twice that) plus the 20 MB of
// decoded strings. Field by field, the buffer holds one field's JSON at a
// time (at most one entry's code), and what stays is the decoded request.

// decodeObject decodes one JSON object from r into v, a pointer to a
// struct. strict rejects unknown fields, naming the one most likely meant.
func decodeObject(r io.Reader, v any, strict bool) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("httpapi: decodeObject needs a pointer to a struct, got %T", v)
	}
	dec := json.NewDecoder(r)
	if strict {
		dec.DisallowUnknownFields()
	}
	d := &streamDecoder{dec: dec, strict: strict}
	tok, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return invalid("", "the request body is empty; send a JSON object")
	case err != nil:
		return d.syntax(err)
	case tok != json.Delim('{'):
		return invalid("", "the body must be a JSON object, got %s", describeToken(tok))
	}
	if err := d.object("", rv.Elem()); err != nil {
		return err
	}
	// Exactly one value: trailing data is an error, not ignored.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return mbe
		}
		return invalid("", "the body must hold exactly one JSON object")
	}
	return nil
}

type streamDecoder struct {
	dec    *json.Decoder
	strict bool
}

// object decodes the members of an object whose '{' was just read.
func (d *streamDecoder) object(path string, sv reflect.Value) error {
	fields := fieldsOf(sv.Type())
	for d.dec.More() {
		tok, err := d.dec.Token()
		if err != nil {
			return d.syntax(err)
		}
		key, _ := tok.(string)
		f, ok := fields.find(key)
		if !ok {
			if d.strict {
				return invalid(joinKey(path, key), "unknown field%s; this body takes: %s (see GET /openapi.json)",
					didyoumean.Hint(key, fields.names), strings.Join(fields.names, ", "))
			}
			var skip json.RawMessage
			if err := d.dec.Decode(&skip); err != nil {
				return d.valueError(joinKey(path, key), err)
			}
			continue
		}
		fv := sv.FieldByIndex(f.index)
		if err := d.value(joinKey(path, f.name), fv); err != nil {
			return err
		}
	}
	if _, err := d.dec.Token(); err != nil { // the closing '}'
		return d.syntax(err)
	}
	return nil
}

// value decodes one field. A slice of structs is streamed element by
// element; anything else is one Decode (which buffers only that value).
func (d *streamDecoder) value(path string, fv reflect.Value) error {
	if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct {
		return d.slice(path, fv)
	}
	if err := d.dec.Decode(fv.Addr().Interface()); err != nil {
		return d.valueError(path, err)
	}
	return nil
}

func (d *streamDecoder) slice(path string, fv reflect.Value) error {
	tok, err := d.dec.Token()
	if err != nil {
		return d.syntax(err)
	}
	if tok == nil { // null
		fv.SetZero()
		return nil
	}
	if tok != json.Delim('[') {
		return invalid(path, "must be a list of objects, got %s", describeToken(tok))
	}
	out := reflect.MakeSlice(fv.Type(), 0, 4)
	for i := 0; d.dec.More(); i++ {
		elem := reflect.New(fv.Type().Elem())
		if err := d.dec.Decode(elem.Interface()); err != nil {
			return d.valueError(fmt.Sprintf("%s[%d]", path, i), err)
		}
		out = reflect.Append(out, elem.Elem())
	}
	if _, err := d.dec.Token(); err != nil { // the closing ']'
		return d.syntax(err)
	}
	fv.Set(out)
	return nil
}

// valueError words an error from decoding the value at path.
func (d *streamDecoder) valueError(path string, err error) error {
	var (
		mbe *http.MaxBytesError
		bbe *BodyBudgetError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return mbe
	case errors.As(err, &bbe):
		return bbe
	case errors.As(err, &ute):
		field := path
		if sub := jsonField(ute.Field); sub != "" && !strings.HasSuffix(path, sub) {
			field = joinKey(path, sub)
		}
		return invalid(field, "must be %s, got JSON %s", goTypeWords(ute.Type), ute.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return invalid(joinKey(path, f), "unknown field%s (see GET /openapi.json)", didyoumean.Hint(f, requestFieldNames))
	}
	return d.syntax(err)
}

func (d *streamDecoder) syntax(err error) error {
	var (
		mbe *http.MaxBytesError
		bbe *BodyBudgetError
		se  *json.SyntaxError
	)
	switch {
	case errors.As(err, &mbe):
		return mbe
	case errors.As(err, &bbe):
		return bbe
	case errors.As(err, &se):
		return invalid("", "invalid JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return invalid("", "the JSON body ends early (at byte %d)", d.dec.InputOffset())
	}
	return invalid("", "invalid JSON body: %v", err)
}

func invalid(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Detail: ErrorDetail{Code: CodeInvalidRequest, Field: field, Message: fmt.Sprintf(format, args...)}}
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describeToken(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "a list"
		}
		return "an object"
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// goTypeWords says what a Go type takes, in JSON words.
func goTypeWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return goTypeWords(t.Elem())
	}
	return t.String()
}

// structFields maps a struct's JSON names to its fields (embedded structs
// flattened, as encoding/json does).
type structFields struct {
	byName map[string]structField
	names  []string
}

type structField struct {
	name  string
	index []int
}

// find matches a key exactly, else case-insensitively (as encoding/json
// does).
func (s *structFields) find(key string) (structField, bool) {
	if f, ok := s.byName[key]; ok {
		return f, true
	}
	for n, f := range s.byName {
		if strings.EqualFold(n, key) {
			return f, true
		}
	}
	return structField{}, false
}

var fieldCache sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	sf := &structFields{byName: map[string]structField{}}
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := sf.byName[name]; dup {
			continue // the shallower one wins, as in encoding/json
		}
		sf.byName[name] = structField{name: name, index: f.Index}
		sf.names = append(sf.names, name)
	}
	fieldCache.Store(t, sf)
	return sf
}

// requestFieldNames are the fields of a run request, for hints about
// unknown fields inside batch entries.
var requestFieldNames = didyoumean.JSONFields(reflect.TypeFor[RunRequest]())

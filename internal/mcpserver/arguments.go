package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/didyoumean"
)

// Tool arguments are checked here, against each tool's input schema, before
// the SDK sees them. The SDK's own validation rejects the same calls, but in
// words a model cannot act on ("validating root: unexpected additional
// properties", "<invalid reflect.Value> has type null", "json: cannot
// unmarshal ... into Go struct field mcpserver.GetJobInput.max_bytes"). Here
// every problem names its field (with a path into arrays and objects), says
// what the field takes, and suggests the field that was probably meant.
//
// A null for an optional field is read as "not given" (models send
// "code": null next to a script_path): the field is dropped from the
// arguments rather than refused.

// addTool registers a tool like mcp.AddTool, and records its input schema
// (inferred here exactly as the SDK would) for checkArguments.
func addTool[In, Out any](t *tools, srv *mcp.Server, tool *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	if tool.InputSchema == nil {
		s, err := jsonschema.For[In](&jsonschema.ForOptions{})
		if err != nil {
			panic(fmt.Sprintf("mcpserver: input schema of %s: %v", tool.Name, err))
		}
		tool.InputSchema = s
	}
	if s, ok := tool.InputSchema.(*jsonschema.Schema); ok {
		if t.inputs == nil {
			t.inputs = map[string]*jsonschema.Schema{}
		}
		t.inputs[tool.Name] = s
	}
	mcp.AddTool(srv, tool, h)
}

// checkArgumentsMiddleware answers a tools/call whose arguments do not fit
// the tool's schema with a tool error naming the field, and drops nulls of
// optional fields.
func (t *tools) checkArgumentsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		schema := t.inputs[call.Params.Name]
		if schema == nil {
			return next(ctx, method, req)
		}
		args, err := checkArguments(call.Params.Name, call.Params.Arguments, schema)
		if err != nil {
			res := &mcp.CallToolResult{}
			res.SetError(err)
			return res, nil
		}
		call.Params.Arguments = args
		return next(ctx, method, req)
	}
}

// checkArguments checks raw against schema and returns the arguments with
// optional nulls removed.
func checkArguments(tool string, raw json.RawMessage, schema *jsonschema.Schema) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments: not valid JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments: must be a JSON object of %s's fields, got %s", tool, jsonKind(v))
	}
	c := checker{tool: tool}
	changed := c.object("", obj, schema)
	if c.err != nil {
		return nil, c.err
	}
	if !changed {
		return raw, nil
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("arguments: %v", err)
	}
	return out, nil
}

// maxJSONInt is 2^53-1, the largest integer every JSON decoder keeps exact.
const maxJSONInt = 1<<53 - 1

type checker struct {
	tool string
	err  error
}

func (c *checker) fail(path, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
	}
}

// object checks the members of an object against an object schema and
// reports whether it removed any (optional nulls).
func (c *checker) object(path string, obj map[string]any, s *jsonschema.Schema) bool {
	changed := false
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if c.err != nil {
			return changed
		}
		val := obj[k]
		p := joinPath(path, k)
		prop, known := s.Properties[k]
		if !known {
			if extra := s.AdditionalProperties; extra != nil && !isFalse(extra) {
				c.value(p, val, extra)
				continue
			}
			c.fail(p, "unknown field%s. %s", didyoumean.Hint(k, propertyNames(s)), c.takes(path, s))
			continue
		}
		if val == nil && !allows(prop, "null") {
			if slices.Contains(s.Required, k) {
				c.fail(p, "is required and cannot be null; give %s", describe(prop))
				continue
			}
			delete(obj, k) // null for an optional field: as if not given
			changed = true
			continue
		}
		c.value(p, val, prop)
	}
	for _, r := range s.Required {
		if _, ok := obj[r]; !ok && c.err == nil {
			c.fail(joinPath(path, r), "is required: give %s", describe(s.Properties[r]))
		}
	}
	return changed
}

// value checks one JSON value against its schema (types, integer range,
// nested objects and arrays).
func (c *checker) value(path string, v any, s *jsonschema.Schema) {
	if s == nil || c.err != nil {
		return
	}
	switch x := v.(type) {
	case nil:
		if !allows(s, "null") {
			c.fail(path, "cannot be null; give %s", describe(s))
		}
	case string:
		if !allows(s, "string") {
			c.fail(path, "must be %s, got a string", describe(s))
		}
	case bool:
		if !allows(s, "boolean") {
			c.fail(path, "must be %s, got %v", describe(s), x)
		}
	case json.Number:
		switch {
		case allows(s, "integer") && !allows(s, "number"):
			// JSON's interoperable integers: beyond 2^53 a number is a
			// float to most decoders (the SDK's included), and comes out
			// rounded or as an overflow error.
			n, err := strconv.ParseInt(x.String(), 10, 64)
			if err != nil || n > maxJSONInt || n < -maxJSONInt {
				if f, ferr := x.Float64(); ferr == nil && f != math.Trunc(f) {
					c.fail(path, "must be a whole number, got %s", x)
				} else {
					c.fail(path, "must be a whole number from %d to %d, got %s", -maxJSONInt, maxJSONInt, x)
				}
			}
		case allows(s, "number"):
			if f, err := x.Float64(); err != nil || math.IsInf(f, 0) {
				c.fail(path, "must be a finite number, got %s", x)
			}
		default:
			c.fail(path, "must be %s, got the number %s", describe(s), x)
		}
	case []any:
		if !allows(s, "array") {
			c.fail(path, "must be %s, got a list", describe(s))
			return
		}
		for i, it := range x {
			c.value(fmt.Sprintf("%s[%d]", path, i), it, s.Items)
		}
	case map[string]any:
		if !allows(s, "object") {
			c.fail(path, "must be %s, got an object", describe(s))
			return
		}
		if len(s.Properties) > 0 || isFalse(s.AdditionalProperties) {
			c.object(path, x, s)
			return
		}
		for k, it := range x {
			c.value(path+"."+k, it, s.AdditionalProperties)
		}
	}
}

// takes lists the fields an object takes, for an unknown-field error.
func (c *checker) takes(path string, s *jsonschema.Schema) string {
	who := c.tool
	if path != "" {
		who = path
	}
	return fmt.Sprintf("%s takes: %s", who, strings.Join(propertyNames(s), ", "))
}

func propertyNames(s *jsonschema.Schema) []string {
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func types(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

// allows reports whether s accepts JSON type typ (a schema without a type
// accepts anything; "number" also accepts integers).
func allows(s *jsonschema.Schema, typ string) bool {
	ts := types(s)
	if len(ts) == 0 {
		return true
	}
	return slices.Contains(ts, typ) || (typ == "integer" && slices.Contains(ts, "number"))
}

// isFalse reports whether s is the "false" schema (no additional
// properties allowed), as jsonschema.For writes it for structs.
func isFalse(s *jsonschema.Schema) bool {
	return s != nil && s.Not != nil && len(types(s.Not)) == 0 && len(s.Not.Properties) == 0
}

// describe says in words what a schema takes: "a string", "a list of
// strings", "an object", "a whole number".
func describe(s *jsonschema.Schema) string {
	if s == nil {
		return "a value"
	}
	var parts []string
	for _, t := range types(s) {
		switch t {
		case "null":
		case "string":
			parts = append(parts, "a string")
		case "integer":
			parts = append(parts, "a whole number")
		case "number":
			parts = append(parts, "a number")
		case "boolean":
			parts = append(parts, "true or false")
		case "array":
			if s.Items != nil && len(types(s.Items)) > 0 {
				parts = append(parts, "a list of "+strings.TrimPrefix(strings.TrimPrefix(describe(s.Items), "a "), "an ")+"s")
			} else {
				parts = append(parts, "a list")
			}
		case "object":
			parts = append(parts, "an object")
		}
	}
	if len(parts) == 0 {
		return "a value"
	}
	return strings.Join(parts, " or ")
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case []any:
		return "a list"
	}
	return "an object"
}

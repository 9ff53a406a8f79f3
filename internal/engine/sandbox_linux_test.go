package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Requests may only tighten the server's sandbox; a loosening request is
// rejected up front (Validate, used before queuing jobs) and by Run, naming
// the field.
func TestSandboxRequestsOnlyTighten(t *testing.T) {
	eng, err := New(Config{Workspace: t.TempDir(), StateDir: t.TempDir(),
		Sandbox: sandbox.Settings{Policy: sandbox.PolicyWorkspace, Network: sandbox.NetworkDeny}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	ctx := context.Background()
	for _, c := range []struct {
		req   Request
		field string
	}{
		{Request{Code: "print(1)", Sandbox: "none"}, "sandbox"},
		{Request{Code: "print(1)", Sandbox: "jail"}, "sandbox"},
		{Request{Code: "print(1)", Network: "allow"}, "network"},
		{Request{Code: "print(1)", Limits: &sandbox.Limits{MemoryBytes: 64 << 30}}, "limits"},
		{Request{Code: "print(1)", Limits: &sandbox.Limits{OpenFiles: 3}}, "limits"},
	} {
		for name, err := range map[string]error{"validate": eng.Validate(ctx, c.req), "run": func() error { _, err := eng.Run(ctx, c.req, nil); return err }()} {
			var re *RequestError
			if !errors.As(err, &re) || re.Field != c.field {
				t.Errorf("%s %+v: err %v, want a %s error", name, c.req, err, c.field)
			}
		}
	}
	res, err := eng.Run(ctx, Request{Code: "print('ok')", Sandbox: "strict"}, nil)
	if err != nil || res.Stdout != "ok\n" || !strings.HasPrefix(res.Sandbox, "strict (network deny") {
		t.Fatalf("strict request: %+v %v", res, err)
	}
}

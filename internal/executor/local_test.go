package executor

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/launcher"
)

func TestMain(m *testing.M) {
	launcher.MaybeRun()
	os.Exit(m.Run())
}

func TestBatchRejectsBadShapes(t *testing.T) {
	eng, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	l := NewLocal(eng, "test", 2)
	many := make([]engine.Request, MaxBatch+1)
	tests := []struct {
		name  string
		req   BatchRequest
		field string
		msg   string
	}{
		{"empty", BatchRequest{}, "codes", "empty"},
		{"too many", BatchRequest{Requests: many}, "codes", "limit is 20"},
		{"negative workers", BatchRequest{Requests: many[:1], MaxWorkers: -1}, "max_workers", "positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.Batch(context.Background(), tt.req, nil)
			var re *engine.RequestError
			if !errors.As(err, &re) || re.Field != tt.field || !strings.Contains(re.Message, tt.msg) {
				t.Fatalf("err %v; want field %s with %q", err, tt.field, tt.msg)
			}
		})
	}
}

// With one worker the snippets run strictly one after another: each sees
// the marker file of the previous one and none of a later one.
func TestBatchHonoursWorkerCap(t *testing.T) {
	eng, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	l := NewLocal(eng, "test", 1)
	code := "import os, sys\nd = os.getcwd()\nbusy = os.path.join(d, 'busy')\nif os.path.exists(busy): sys.exit(9)\nopen(busy, 'w').close()\nimport time; time.sleep(0.05)\nos.remove(busy)\n"
	var reqs []engine.Request
	for range 4 {
		reqs = append(reqs, engine.Request{Code: code})
	}
	out, err := l.Batch(context.Background(), BatchRequest{Requests: reqs, MaxWorkers: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range out.Results {
		if r.ExitCode != 0 {
			t.Fatalf("snippet %d overlapped another (exit %d, stderr %q)", i, r.ExitCode, r.Stderr)
		}
	}
}

package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
)

// A draining server (shutdown begun) answers 503 with Retry-After and asks
// the client to close the connection; /health too, so load balancers stop
// sending work.
func TestDrainingAnswers503(t *testing.T) {
	eng, err := engine.New(engine.Config{Workspace: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s, err := NewServer(Options{Executor: executor.NewLocal(eng, "test", 1), NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	s.draining.Store(true)
	for _, path := range []string{"/health", "/v1/run", "/mcp"} {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("POST", path, nil))
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || w.Header().Get("Connection") != "close" {
			t.Errorf("%s: %d %v", path, w.Code, w.Header())
		}
	}
}

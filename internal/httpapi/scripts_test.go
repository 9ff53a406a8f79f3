package httpapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/scripts"
)

// TestRemoteScriptsLiveOnTheServer: through the remote executor, saved
// scripts and autosaves land in the execution server's store.
func TestRemoteScriptsLiveOnTheServer(t *testing.T) {
	f := newFixture(t)
	serverStore := openStore(t)
	ts, _ := serve(t, withJobs(t, f.local(t, nil)), func(o *httpapi.Options) { o.Scripts = serverStore })
	c, err := httpapi.NewClient(ts.URL, httpapi.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e, err := c.SaveScript(ctx, scripts.SaveRequest{Name: "fetch", Code: "print('x')", Dependencies: []string{"requests"}})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(e.Path) != serverStore.SavedDir() {
		t.Fatalf("saved at %s, want the server's store %s", e.Path, serverStore.SavedDir())
	}
	if src, err := os.ReadFile(e.Path); err != nil || !strings.Contains(string(src), "# dependencies = [") {
		t.Fatalf("saved file: %q %v", src, err)
	}
	if _, err := c.SaveScript(ctx, scripts.SaveRequest{Name: "fetch", Code: "1"}); err == nil || !strings.HasPrefix(err.Error(), `name: a script named "fetch" already exists`) {
		t.Fatalf("saving over it: %v", err)
	}

	c.Autosave(scripts.AutosaveRecord{Tool: "run_python", Code: "print('auto')", Arguments: map[string]any{"timeout": 3}, JobID: "j1"})
	c.FlushAutosaves(ctx)
	serverStore.Flush()
	list, err := serverStore.List(true)
	if err != nil {
		t.Fatal(err)
	}
	var auto *scripts.Entry
	for i := range list {
		if list[i].Autosaved {
			auto = &list[i]
		}
	}
	if auto == nil {
		t.Fatalf("no autosave on the server: %+v", list)
	}
	sc, err := c.ViewScript(ctx, auto.Name, true)
	if err != nil || sc.Source != "print('auto')" || sc.Sidecar == nil || sc.Sidecar.Tool != "run_python" || sc.Sidecar.JobID != "j1" {
		t.Fatalf("autosave seen through the client: %+v %v", sc, err)
	}

	// A server without a store says so.
	bare, _ := serve(t, f.local(t, nil), nil)
	c2, _ := httpapi.NewClient(bare.URL, httpapi.ClientOptions{})
	if _, err := c2.ListScripts(ctx, false); err == nil || !strings.Contains(err.Error(), "keeps no saved scripts") {
		t.Fatalf("server without a store: %v", err)
	}
}

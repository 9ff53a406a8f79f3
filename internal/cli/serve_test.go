package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeAuthChoices: every way of starting serve ends with a token or an
// explicit --insecure-no-auth; contradictions and a token file runs could
// read are refused before anything starts.
func TestServeAuthChoices(t *testing.T) {
	ws := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("a-token-of-twenty-chars\n"), 0o600)
	logger := newLogger(&bytes.Buffer{}, "error")
	for _, c := range []struct {
		name      string
		tokenFile string
		env       string
		noAuth    bool
		state     string // "" a fresh one
		token     string // "gen": a generated one
		source    string
		err       string
	}{
		{name: "nothing given: generated", token: "gen", source: "generated into "},
		{name: "a token file", tokenFile: tokenFile, token: "a-token-of-twenty-chars", source: "token file " + tokenFile},
		{name: "PYEXEC_TOKEN", env: "from-the-environment-1", token: "from-the-environment-1", source: "PYEXEC_TOKEN"},
		{name: "no auth on purpose", noAuth: true},
		{name: "no auth and a token", noAuth: true, tokenFile: tokenFile, err: "contradict"},
		{name: "token file missing", tokenFile: filepath.Join(ws, "nope"), err: "--token-file"},
		{name: "state dir inside the workspace", state: filepath.Join(ws, "state"), err: "where runs can read it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("PYEXEC_TOKEN", c.env)
			}
			state := c.state
			if state == "" {
				state = t.TempDir()
			}
			token, source, err := serveAuth(c.tokenFile, c.noAuth, state, ws, logger)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !strings.HasPrefix(source, c.source) {
				t.Fatalf("token %q source %q err %v", token, source, err)
			}
			switch {
			case c.token == "gen":
				data, _ := os.ReadFile(filepath.Join(state, "server-token"))
				if st, err := os.Stat(filepath.Join(state, "server-token")); err != nil || st.Mode().Perm() != 0o600 || strings.TrimSpace(string(data)) != token || len(token) != 64 {
					t.Fatalf("generated token %q, file %v %v", token, st, err)
				}
				// The next start with the same state dir uses the same token.
				again, src, err := serveAuth("", false, state, ws, logger)
				if err != nil || again != token || !strings.HasPrefix(src, "token file ") {
					t.Fatalf("second start: %q %q %v", again, src, err)
				}
			case token != c.token:
				t.Fatalf("token %q, want %q", token, c.token)
			}
			if _, still := os.LookupEnv("PYEXEC_TOKEN"); still {
				t.Fatal("PYEXEC_TOKEN is still in the environment that runs inherit")
			}
		})
	}
	// dispatch refuses before starting anything.
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"serve", "--workspace", ws, "--state-dir", filepath.Join(ws, "state"), "--listen", "127.0.0.1:0"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "inside the workspace") {
		t.Fatalf("serve with the state dir in the workspace: %d %q", code, errb.String())
	}
	// A generated token file that others can read is refused.
	loose := t.TempDir()
	os.WriteFile(filepath.Join(loose, "server-token"), []byte(strings.Repeat("a", 64)), 0o644)
	if _, _, err := serveAuth("", false, loose, ws, logger); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable token file: %v", err)
	}
}

func TestSeedListenEnv(t *testing.T) {
	t.Setenv("EXECUTION_HOST", "127.0.0.2")
	t.Setenv("EXECUTION_PORT", "9090")
	if got := seedListen("127.0.0.1:8080"); got != "127.0.0.2:9090" {
		t.Fatalf("got %s", got)
	}
	t.Setenv("EXECUTION_HOST", "")
	if got := seedListen("127.0.0.1:8080"); got != "127.0.0.1:9090" {
		t.Fatalf("got %s", got)
	}
}

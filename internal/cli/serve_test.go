package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestServeRefusesOpenListenWithoutToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), []string{"serve", "--listen", addr, "--workspace", t.TempDir(), "--state-dir", t.TempDir()}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "without a token") {
			t.Errorf("%s: exit %d, stderr %q", addr, code, errb.String())
		}
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

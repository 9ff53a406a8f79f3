package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/testutil/mounts"
)

// lockedWriter lets the test write raw lines to the server's stdin between
// the frames the go-sdk client writes, never inside one.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// TestStdioSurvivesBadFrames sends a real `pyexec mcp` a line of garbage, a
// request whose id is an object, a request with a 17 MB stdin and a 30 MB
// line while a background job runs. Each gets an error (parse error,
// invalid request, the stdin limit, the frame limit), the job lives on and
// finishes with all its output, and the next request succeeds.
func TestStdioSurvivesBadFrames(t *testing.T) {
	if testing.Short() {
		t.Skip("starts pyexec mcp and sends it 47 MB")
	}
	ws := t.TempDir()
	state := t.TempDir()
	mounts.CleanupWaitsFor(t, state)
	cmd := asCLI("mcp", "--workspace", ws, "--state-dir", state, "--log-level", "warn")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	in := &lockedWriter{w: stdin}

	// Replies to the raw lines (id null, or a "raw-" id) go to the test;
	// everything else to the go-sdk client.
	raw := make(chan map[string]any, 8)
	toClient, fromServer := io.Pipe()
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			line := sc.Bytes()
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				if id, has := m["id"]; has && (id == nil || strings.HasPrefix(toString(id), "raw-")) {
					raw <- m
					continue
				}
			}
			fromServer.Write(append(line, '\n'))
		}
		fromServer.Close()
	}()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: toClient, Writer: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(tool string, args map[string]any) (map[string]any, string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		return out, text.String(), res.IsError
	}

	// A job that runs through all of it: it waits for a file the test
	// writes in the workspace at the end.
	gate := ws + "/go"
	out, text, isErr := call("run_python", map[string]any{"mode": "async", "code": "import os, time\nprint('started', flush=True)\nwhile not os.path.exists(" + pyQuote(gate) + "):\n    time.sleep(0.05)\nprint('finished')"})
	id, _ := out["job_id"].(string)
	if isErr || id == "" {
		t.Fatalf("start job: %v %q", out, text)
	}
	if o, _, _ := call("get_job", map[string]any{"job_id": id, "wait": 30}); !strings.HasPrefix(toString(o["stdout"]), "started") {
		t.Fatalf("job did not start: %v", o)
	}

	rawReply := func(what string) map[string]any {
		t.Helper()
		select {
		case m := <-raw:
			return m
		case <-time.After(60 * time.Second):
			t.Fatalf("no reply to %s", what)
			return nil
		}
	}
	wantError := func(what string, m map[string]any, code float64, id any, says string) {
		t.Helper()
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != code || m["id"] != id || !strings.Contains(toString(e["message"]), says) {
			t.Fatalf("%s: reply %v, want code %v id %v saying %q", what, m, code, id, says)
		}
	}

	io.WriteString(in, "garbage\n")
	wantError("garbage", rawReply("garbage"), -32700, nil, "Parse error")
	io.WriteString(in, `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"server_info","arguments":{}}}`+"\n")
	wantError("object id", rawReply("object id"), -32600, nil, "id must be a string or a number")

	// 17 MB of stdin is a valid frame: the tool refuses it, naming the field.
	_, text, isErr = call("run_python", map[string]any{"code": "import sys; print(len(sys.stdin.read()))", "stdin": strings.Repeat("s", 17_000_000)})
	if !isErr || !strings.Contains(text, "stdin: is 16.2 MiB") || !strings.Contains(text, "the limit is 1 MiB") {
		t.Fatalf("17 MB stdin: isError=%v %q", isErr, text)
	}
	// 30 MB is past the largest request: refused unread, by id.
	huge := `{"jsonrpc":"2.0","id":"raw-huge","method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(1)","stdin":"` + strings.Repeat("h", 30_000_000) + `"}}}` + "\n"
	io.WriteString(in, huge)
	wantError("30 MB line", rawReply("30 MB line"), -32600, "raw-huge", "the largest request this server reads is 26.0 MiB")

	// The job lived through it all, and the server still answers.
	if o, _, _ := call("get_job", map[string]any{"job_id": id}); o["status"] != "running" {
		t.Fatalf("job after the bad frames: %v", o)
	}
	if o, text, isErr := call("run_python", map[string]any{"code": "print('next request')"}); isErr || o["stdout"] != "next request\n" {
		t.Fatalf("next request: %v %q", o, text)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var fin map[string]any
	off := 0.0
	for {
		fin, _, _ = call("get_job", map[string]any{"job_id": id, "stdout_offset": off, "wait": 30})
		off = fin["next_stdout_offset"].(float64)
		if fin["output_done"] == true {
			break
		}
	}
	if fin["status"] != "completed" || off != float64(len("started\nfinished\n")) {
		t.Fatalf("job at the end: %v", fin)
	}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

func pyQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

package jobs

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestCursorReadsReturnOnlyNewBytes(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx := context.Background()
	j, err := m.Start(ctx, code("x"), "cursor")
	if err != nil {
		t.Fatal(err)
	}
	c := f.next(t)

	var cur Cursor
	read := func() Chunk {
		t.Helper()
		ch, err := m.Output(ctx, j.ID, cur)
		if err != nil {
			t.Fatal(err)
		}
		cur.StdoutOffset, cur.StderrOffset = ch.StdoutOffset, ch.StderrOffset
		return ch
	}
	var gotOut, gotErr strings.Builder
	steps := []struct{ out, err string }{
		{"line 1\n", ""},
		{"", "warn 1\n"},
		{"line 2\n", "warn 2\n"},
		{"ünïcødé ✓ 漢字\n", ""},
		{"", ""},
	}
	for i, s := range steps {
		if s.out != "" {
			c.stdout(t, s.out)
		}
		if s.err != "" {
			c.stderr(t, s.err)
		}
		ch := read()
		if ch.Stdout != s.out || ch.Stderr != s.err {
			t.Fatalf("step %d: got (%q, %q), want only the new (%q, %q)", i, ch.Stdout, ch.Stderr, s.out, s.err)
		}
		if ch.Done {
			t.Fatalf("step %d: done while running", i)
		}
		gotOut.WriteString(ch.Stdout)
		gotErr.WriteString(ch.Stderr)
		again := read()
		if again.Stdout != "" || again.Stderr != "" {
			t.Fatalf("step %d: second read returned (%q, %q) again", i, again.Stdout, again.Stderr)
		}
	}
	c.stdout(t, "last\n")
	c.exit(t, 0)
	done := waitDone(t, m, j.ID)
	if done.Status != StatusCompleted || done.ExitCode == nil || *done.ExitCode != 0 {
		t.Fatalf("job = %+v, want completed exit 0", done)
	}
	ch := read()
	if ch.Stdout != "last\n" || !ch.Done || ch.Status != StatusCompleted {
		t.Fatalf("final read = %+v", ch)
	}
	gotOut.WriteString(ch.Stdout)

	// From the start, after the job left memory: whole logs from disk.
	all, err := m.Output(ctx, j.ID, Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	if all.Stdout != gotOut.String() || all.Stderr != gotErr.String() || !all.Done {
		t.Fatalf("full read = %+v, want stdout %q stderr %q", all, gotOut.String(), gotErr.String())
	}
	if done.StdoutBytes != int64(len(gotOut.String())) || done.StderrBytes != int64(len(gotErr.String())) {
		t.Fatalf("sizes = %d/%d", done.StdoutBytes, done.StderrBytes)
	}

	// Small MaxBytes pages through without overlap or loss.
	var paged strings.Builder
	cur = Cursor{MaxBytes: 5}
	for {
		ch := read()
		paged.WriteString(ch.Stdout)
		if ch.Done {
			break
		}
	}
	if paged.String() != gotOut.String() {
		t.Fatalf("paged = %q, want %q", paged.String(), gotOut.String())
	}

	if _, err := m.Output(ctx, j.ID, Cursor{StdoutOffset: 1 << 30}); err == nil {
		t.Fatal("offset past the end: no error")
	}
	if _, err := m.Output(ctx, "nope", Cursor{}); err == nil {
		t.Fatal("unknown job: no error")
	}
}

func TestLongPollWakesOnOutput(t *testing.T) {
	waiting := make(chan struct{}, 1)
	m, f, _ := openTest(t, nil)
	m.onWait = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	ctx := context.Background()
	j, err := m.Start(ctx, code("x"), "")
	if err != nil {
		t.Fatal(err)
	}
	c := f.next(t)
	type res struct {
		ch  Chunk
		err error
	}
	got := make(chan res, 1)
	go func() {
		ch, err := m.Output(ctx, j.ID, Cursor{Wait: time.Minute})
		got <- res{ch, err}
	}()
	<-waiting // the reader is blocked on the job's change channel
	c.stdout(t, "hello\n")
	r := <-got
	if r.err != nil || r.ch.Stdout != "hello\n" || r.ch.StdoutOffset != 6 {
		t.Fatalf("long poll = %+v, %v", r.ch, r.err)
	}

	// A waiting reader also wakes when the job ends without more output.
	go func() {
		ch, err := m.Output(ctx, j.ID, Cursor{StdoutOffset: 6, Wait: time.Minute})
		got <- res{ch, err}
	}()
	<-waiting
	c.exit(t, 0)
	r = <-got
	if r.err != nil || r.ch.Stdout != "" || !r.ch.Done {
		t.Fatalf("long poll at end = %+v, %v", r.ch, r.err)
	}

	// A finished job never blocks.
	ch, err := m.Output(ctx, j.ID, Cursor{StdoutOffset: 6, Wait: time.Hour})
	if err != nil || !ch.Done {
		t.Fatalf("read of finished job = %+v, %v", ch, err)
	}
}

// TestLongPollReturnsWholeLines: a long-poll does not answer with the
// first byte of a line: it waits for the line's end (and cuts after the
// last newline it has), or, when no newline comes, answers with the
// partial line shortly after (lineSettle).
func TestLongPollReturnsWholeLines(t *testing.T) {
	waiting := make(chan struct{}, 8)
	m, f, _ := openTest(t, nil)
	m.onWait = func() { waiting <- struct{}{} }
	ctx := context.Background()
	j, err := m.Start(ctx, code("x"), "")
	if err != nil {
		t.Fatal(err)
	}
	c := f.next(t)
	type res struct {
		ch  Chunk
		err error
	}
	got := make(chan res, 1)
	go func() {
		ch, err := m.Output(ctx, j.ID, Cursor{Wait: time.Minute})
		got <- res{ch, err}
	}()
	<-waiting
	c.stdout(t, "par")
	<-waiting // woken by "par", it went back to waiting for the line's end
	select {
	case r := <-got:
		t.Fatalf("answered with a partial line: %+v", r.ch)
	default:
	}
	c.stdout(t, "tial\nnext")
	r := <-got
	if r.err != nil || r.ch.Stdout != "partial\n" || r.ch.StdoutOffset != 8 {
		t.Fatalf("long poll = %+v, %v", r.ch, r.err)
	}
	// "next" has no newline yet: it still comes, after the settle delay.
	r2, err := m.Output(ctx, j.ID, Cursor{StdoutOffset: 8, Wait: time.Minute})
	if err != nil || r2.Stdout != "next" || r2.StdoutOffset != 12 {
		t.Fatalf("partial line after the settle delay = %+v, %v", r2, err)
	}
	<-waiting // it did wait for the rest of the line first
	c.exit(t, 0)
}

func TestLongPollHonoursContext(t *testing.T) {
	m, f, _ := openTest(t, nil)
	j, err := m.Start(context.Background(), code("x"), "")
	if err != nil {
		t.Fatal(err)
	}
	c := f.next(t)
	ctx, cancel := context.WithCancel(context.Background())
	m.onWait = cancel
	if _, err := m.Output(ctx, j.ID, Cursor{Wait: time.Hour}); err == nil {
		t.Fatal("cancelled long poll returned no error")
	}
	c.exit(t, 0)
}

func TestUTF8NeverSplitAcrossChunks(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx := context.Background()
	j, _ := m.Start(ctx, code("x"), "")
	c := f.next(t)
	euro := "€" // 3 bytes
	var cur Cursor
	for i := 0; i < 2; i++ {
		c.stdout(t, euro[i:i+1])
		ch, err := m.Output(ctx, j.ID, cur)
		if err != nil || ch.Stdout != "" || ch.StdoutOffset != 0 {
			t.Fatalf("partial character returned: %+v %v", ch, err)
		}
	}
	c.stdout(t, euro[2:]+"x")
	ch, err := m.Output(ctx, j.ID, cur)
	if err != nil || ch.Stdout != "€x" || ch.StdoutOffset != 4 {
		t.Fatalf("got %+v %v", ch, err)
	}
	// A dangling fragment at the very end is returned (replaced) once the job ends.
	c.stdout(t, "\xe2\x82")
	c.exit(t, 0)
	waitDone(t, m, j.ID)
	ch, err = m.Output(ctx, j.ID, Cursor{StdoutOffset: 4})
	if err != nil || ch.Stdout != "\uFFFD" || !ch.Done {
		t.Fatalf("tail = %+v %v", ch, err)
	}
}

func TestSafeCut(t *testing.T) {
	tests := []struct {
		name  string
		b     string
		limit int
		eof   bool
		want  int
	}{
		{"ascii under limit", "abc", 10, false, 3},
		{"ascii at limit", "abcdef", 3, false, 3},
		{"limit inside euro, more in buffer", "a€b", 2, false, 1},
		{"limit inside euro at eof", "a€b", 2, true, 1},
		{"incomplete tail, more may come", "a\xe2\x82", 10, false, 1},
		{"incomplete tail at eof", "a\xe2\x82", 10, true, 3},
		{"only a fragment, more may come", "\xe2\x82", 10, false, 0},
		{"limit smaller than one char", "€b", 1, false, 3},
		{"invalid byte is not held back", "a\xff", 10, false, 2},
		{"four-byte char whole", "😀", 4, false, 4},
		{"four-byte char cut", "x😀", 3, false, 1},
		{"stray continuation bytes", "\x80\x80\x80\x80\x80", 10, false, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := safeCut([]byte(tt.b), tt.limit, tt.eof); got != tt.want {
				t.Fatalf("safeCut(%q, %d, %v) = %d, want %d", tt.b, tt.limit, tt.eof, got, tt.want)
			}
		})
	}
}

// TestJobLogBudget: one budget for a job's two logs, with a reserve per
// stream, so a flood on stdout still leaves room for a traceback on stderr.
func TestJobLogBudget(t *testing.T) {
	m, f, _ := openTest(t, func(c *Config) { c.LogCap = 80 }) // reserve: 10 per stream
	ctx := context.Background()
	j, _ := m.Start(ctx, code("x"), "")
	c := f.next(t)
	c.stdout(t, strings.Repeat("o", 50))
	c.stdout(t, strings.Repeat("p", 50))
	c.stdout(t, "more")
	c.stderr(t, "Traceback: 0123456789abcdef")
	c.exit(t, 0)
	done := waitDone(t, m, j.ID)
	if !done.StdoutTruncated || !done.StderrTruncated {
		t.Fatalf("truncation flags = %v/%v", done.StdoutTruncated, done.StderrTruncated)
	}
	if done.StdoutBytes != 104 || done.StderrBytes != 27 {
		t.Fatalf("byte counts = %d/%d, want the totals the script wrote (104/27)", done.StdoutBytes, done.StderrBytes)
	}
	ch, err := m.Output(ctx, j.ID, Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	note := "\n[pyexec: the job's output reached its log budget of 80 bytes (stdout and stderr together); further "
	if want := strings.Repeat("o", 50) + strings.Repeat("p", 20) + note + "stdout was dropped]\n"; ch.Stdout != want {
		t.Fatalf("capped stdout = %q, want %q", ch.Stdout, want)
	}
	if want := "Traceback:" + note + "stderr was dropped]\n"; ch.Stderr != want {
		t.Fatalf("stderr kept its reserve: %q, want %q", ch.Stderr, want)
	}
}

package present

import (
	"fmt"
	"strings"
)

// Stream is one output stream as shown to the model.
type Stream struct {
	Name  string // stdout, stderr
	Text  string // what is shown, with a marker where the middle was cut
	Bytes int64  // what the script wrote in all
	Lines int64  // newlines the script wrote in all (0: unknown)
	// Cut says the middle was dropped; HeadBytes is where the dropped part
	// starts in the full stream (its offset in the job's log).
	Cut          bool
	HeadBytes    int
	DroppedBytes int64
	DroppedLines int64
}

// Where tells a marker where the full output is kept.
type Where struct {
	JobID string // the job holding the full output ("" when it was not kept)
	Note  string // why it was not kept, when JobID is ""
}

// cutStream keeps the head (~30%) and the tail (~70%) of text within limit
// bytes, on line boundaries when one is near, so the error at the end
// survives. The marker names the lines and bytes dropped and where the
// full text is. total and lines are the script's counts (the engine may
// already have dropped a middle of its own; the counts still hold).
func cutStream(name, text string, total, lines int64, limit int, where Where) Stream {
	s := Stream{Name: name, Text: text, Bytes: total, Lines: lines}
	if len(text) <= limit {
		return s
	}
	headLimit := limit * 3 / 10
	tailLimit := limit - headLimit
	head := text[:runeStart(text, headLimit)]
	if i := strings.LastIndexByte(head, '\n'); i >= len(head)/2 {
		head = head[:i+1]
	}
	tailStart := runeStart(text, len(text)-tailLimit)
	tail := text[tailStart:]
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/2 && i+1 < len(tail) {
		tail = tail[i+1:]
	}
	s.Cut, s.HeadBytes = true, len(head)
	s.DroppedBytes = max(total-int64(len(head))-int64(len(tail)), int64(len(text)-len(head)-len(tail)))
	shownLines := int64(strings.Count(head, "\n") + strings.Count(tail, "\n"))
	if lines > 0 {
		s.DroppedLines = max(lines-shownLines, 0)
	} else {
		s.DroppedLines = int64(strings.Count(text[len(head):len(text)-len(tail)], "\n"))
	}
	s.Text = head + marker(name, s, where) + tail
	return s
}

func marker(name string, s Stream, where Where) string {
	what := fmt.Sprintf("%s lines (%s bytes) of %s cut here", Commas(s.DroppedLines), Commas(s.DroppedBytes), name)
	if where.JobID != "" {
		return fmt.Sprintf("\n[... %s; the full output is kept: read job://%s/output, or get_job(job_id=%q, %s_offset=%d) ...]\n",
			what, where.JobID, where.JobID, name, s.HeadBytes)
	}
	note := where.Note
	if note == "" {
		note = "the full output was not kept"
	}
	return fmt.Sprintf("\n[... %s; %s ...]\n", what, note)
}

// commas writes n with thousands separators.
// Commas writes n with thousands separators (1,234,567), as results show sizes.
func Commas(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// clip shortens text to at most limit bytes with a plain note.
func clip(text string, limit int) (string, bool) {
	if len(text) <= limit {
		return text, false
	}
	if limit < 80 {
		return text[:runeStart(text, max(limit, 0))], true
	}
	cut := runeStart(text, limit-60)
	return text[:cut] + fmt.Sprintf("\n[... %s more bytes not shown]", Commas(int64(len(text)-cut))), true
}

// Clip cuts text to about limit bytes with a note of how much was left out
// (for a value or traceback that has no job to point to).
func Clip(text string, limit int) string {
	out, _ := clip(text, limit)
	return out
}

// CutOutput fits two streams (such as a handed-off run's output so far)
// into budget characters, with markers saying where the rest is.
func CutOutput(stdout, stderr string, outBytes, errBytes int64, budget int, where Where) (string, string, bool) {
	if budget <= 0 {
		budget = DefaultBudget
	}
	got := share([]int{len(stdout), len(stderr)}, streamBudget(budget))
	o := cutStream("stdout", stdout, outBytes, 0, got[0], where)
	e := cutStream("stderr", stderr, errBytes, 0, got[1], where)
	return o.Text, e.Text, o.Cut || e.Cut
}

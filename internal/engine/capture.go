package engine

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
)

// capture keeps what a run printed on one stream within a fixed budget: the
// first half of the budget verbatim, and the last half in a ring buffer, so
// the beginning (where errors usually start) and the end (where tracebacks
// land) both survive however much a script prints. Memory never exceeds the
// budget.
type capture struct {
	mu    sync.Mutex
	limit int
	head  []byte
	tail  []byte // ring buffer of capacity limit-len(head) once head is full
	pos   int    // next write position in tail when it is full
	full  bool   // tail has wrapped at least once
	total int64
	lines int64 // newlines written, kept or not
}

func newCapture(limit int) *capture {
	if limit < 2 {
		limit = 2
	}
	return &capture{limit: limit}
}

// Write never fails: output beyond the budget is counted and dropped.
func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	c.lines += int64(bytes.Count(p, newline))
	headCap := c.limit / 2
	if len(c.head) < headCap {
		k := min(headCap-len(c.head), len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	tailCap := c.limit - headCap
	for len(p) > 0 {
		if !c.full {
			k := min(tailCap-len(c.tail), len(p))
			c.tail = append(c.tail, p[:k]...)
			p = p[k:]
			if len(c.tail) == tailCap {
				c.full = true
				c.pos = 0
			}
			continue
		}
		if len(p) >= tailCap {
			// Only the last tailCap bytes of p can survive.
			copy(c.tail, p[len(p)-tailCap:])
			c.pos = 0
			break
		}
		k := copy(c.tail[c.pos:], p)
		p = p[k:]
		c.pos = (c.pos + k) % tailCap
	}
	return n, nil
}

var newline = []byte{'\n'}

// Lines is the number of newlines written so far, kept or not.
func (c *capture) Lines() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines
}

// Total is the number of bytes written so far, kept or not.
func (c *capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Text returns the kept bytes as valid UTF-8 (each run of invalid bytes
// becomes one U+FFFD) and whether anything was
// dropped. A marker line in the middle says how many bytes were dropped.
func (c *capture) Text() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var tail []byte
	if c.full {
		tail = append(append(make([]byte, 0, len(c.tail)), c.tail[c.pos:]...), c.tail[:c.pos]...)
	} else {
		tail = c.tail
	}
	kept := int64(len(c.head) + len(tail))
	if kept == c.total {
		return toUTF8(string(c.head) + string(tail)), false
	}
	marker := fmt.Sprintf("\n... [%d bytes truncated: output exceeded the %d-byte inline cap] ...\n", c.total-kept, c.limit)
	return toUTF8(string(c.head)) + marker + toUTF8(string(tail)), true
}

func toUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

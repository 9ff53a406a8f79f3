package engine

import (
	"fmt"
	"testing"
)

func TestCaptureKeepsHeadAndTail(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		writes    []string
		want      string
		truncated bool
	}{
		{"fits", 10, []string{"abc", "def"}, "abcdef", false},
		{"exactly full", 6, []string{"abcdef"}, "abcdef", false},
		{"one big write", 6, []string{"abcdefghij"}, "abc" + marker(4, 6) + "hij", true},
		{"many small writes", 6, []string{"ab", "cd", "ef", "gh", "ij"}, "abc" + marker(4, 6) + "hij", true},
		{"wraps the ring", 4, []string{"12", "34", "56", "78", "9"}, "12" + marker(5, 4) + "89", true},
		{"invalid utf-8 replaced", 100, []string{"a\xffb"}, "a\uFFFDb", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapture(tt.limit)
			var total int
			for _, w := range tt.writes {
				c.Write([]byte(w))
				total += len(w)
			}
			got, truncated := c.Text()
			if got != tt.want || truncated != tt.truncated || c.Total() != int64(total) {
				t.Fatalf("got %q (truncated %v, total %d), want %q (truncated %v, total %d)", got, truncated, c.Total(), tt.want, tt.truncated, total)
			}
		})
	}
}

func marker(dropped, limit int) string {
	return fmt.Sprintf("\n... [%d bytes truncated: output exceeded the %d-byte inline cap] ...\n", dropped, limit)
}

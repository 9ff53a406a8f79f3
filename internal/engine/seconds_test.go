package engine

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestSeconds: a number of seconds from a request becomes a Duration with
// a cap, never a wrapped value; NaN, infinities and negatives are refused
// naming the field.
func TestSeconds(t *testing.T) {
	const def, limit = 30 * time.Second, 600 * time.Second
	for _, c := range []struct {
		in   float64
		want time.Duration
		err  string
	}{
		{0, def, ""},
		{0.5, 500 * time.Millisecond, ""},
		{599, 599 * time.Second, ""},
		{601, limit, ""},
		{1e10, limit, ""}, // wrapped negative before: killed the run at once
		{1e300, limit, ""},
		{math.MaxFloat64, limit, ""},
		{-1, 0, "timeout: must be 0 or more seconds, got -1"},
		{math.NaN(), 0, "timeout: must be a finite number of seconds"},
		{math.Inf(1), 0, "timeout: must be a finite number of seconds"},
	} {
		got, err := Seconds("timeout", c.in, def, limit)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Seconds(%v) error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Seconds(%v) = %v %v, want %v", c.in, got, err, c.want)
		}
	}
	// No cap: the longest Duration, still never negative.
	if got := SecondsUpTo(1e300, 0); got != time.Duration(math.MaxInt64) {
		t.Errorf("SecondsUpTo(1e300, no cap) = %v", got)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1: "1 byte", 512: "512 bytes", 1 << 20: "1 MiB", 2 << 30: "2 GiB",
		1536: "1.5 KiB (1536 bytes)", 17_000_000: "16.2 MiB (17000000 bytes)", -1: "unlimited",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestWireLimit: the largest request is 6 MiB with the default code limit.
func TestWireLimit(t *testing.T) {
	if got := WireLimit(DefaultCodeLimit); got != 6<<20 {
		t.Fatalf("WireLimit = %d, want 6 MiB", got)
	}
}

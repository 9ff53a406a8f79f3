package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkLineToWaitingGetJob measures the latency: from a line
// printed by a running job (real python, timestamped with time.time_ns()) to
// its arrival in a get_job call that was long-polling for it, through the
// go-sdk client over in-memory transports. One op is one line; the median
// and p90 are reported.
func BenchmarkLineToWaitingGetJob(b *testing.B) {
	h := newJobHarnessB(b)
	ctx := context.Background()
	n := b.N
	code := fmt.Sprintf("import time\nfor _ in range(%d):\n    time.sleep(0.02)\n    print(time.time_ns(), flush=True)\n", n)
	out := decodeTB[RunPythonOutput](b, h.callB(b, ctx, "run_python", map[string]any{"code": code, "mode": "async"}))
	var lat []time.Duration
	var off int64
	b.ResetTimer()
	for len(lat) < n {
		g := decodeTB[GetJobOutput](b, h.callB(b, ctx, "get_job", map[string]any{"job_id": out.JobID, "stdout_offset": off, "wait": 10}))
		now := time.Now().UnixNano()
		off = g.NextStdoutOffset
		lines := strings.Fields(g.Stdout)
		if len(lines) > 0 {
			// Only the newest line was printed while get_job waited; older
			// ones in the same chunk queued behind the previous call.
			ts, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Duration(now-ts))
			for range lines[1:] {
				lat = append(lat, -1) // not measured
			}
		}
		if g.OutputDone {
			break
		}
	}
	b.StopTimer()
	lat = slices.DeleteFunc(lat, func(d time.Duration) bool { return d < 0 })
	if len(lat) == 0 {
		b.Fatal("no samples")
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
}

func decodeTB[T any](tb testing.TB, res *mcp.CallToolResult) T {
	tb.Helper()
	var out T
	raw, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	return out
}

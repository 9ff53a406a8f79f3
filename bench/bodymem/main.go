// Command bodymem measures how much a `pyexec serve` grows when many large
// request bodies arrive at once: it starts the server, measures its resident
// memory, sends -n concurrent POST /v1/batch bodies of about -mb megabytes
// each, and reports the growth of the server's peak RSS (VmHWM) and the
// statuses it answered with.
//
//	go run ./bench/bodymem                 # this tree's pyexec
//	go run ./bench/bodymem -bin /path/to/other/pyexec
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	var (
		bin   = flag.String("bin", "", "pyexec binary to measure (default: build ./cmd/pyexec)")
		n     = flag.Int("n", 24, "concurrent batch requests")
		mb    = flag.Int("mb", 20, "approximate size of each batch body in MB")
		extra = flag.String("serve-flags", "--warm 0", "extra flags for pyexec serve")
	)
	flag.Parse()
	if err := run(*bin, *n, *mb, strings.Fields(*extra)); err != nil {
		fmt.Fprintln(os.Stderr, "bodymem:", err)
		os.Exit(1)
	}
}

func run(bin string, n, mb int, extra []string) error {
	dir, err := os.MkdirTemp("", "bodymem-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "pyexec")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/pyexec").CombinedOutput(); err != nil {
			return fmt.Errorf("build: %v\n%s", err, out)
		}
	}
	ws, state := filepath.Join(dir, "ws"), filepath.Join(dir, "state")
	os.MkdirAll(ws, 0o755)
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--workspace", ws, "--state-dir", state, "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	url, err := readyURL(stderr)
	if err != nil {
		return err
	}
	go io.Copy(io.Discard, stderr)
	token := ""
	if b, err := os.ReadFile(filepath.Join(state, "server-token")); err == nil {
		token = strings.TrimSpace(string(b))
	}
	post := func(body []byte) (int, error) {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", url+"/v1/batch", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Warm up (interpreter discovery, first run), then measure.
	if code, err := post(batch(2, 100)); err != nil || code != 200 {
		return fmt.Errorf("warm-up batch: %d %v", code, err)
	}
	rss0, hwm0 := memOf(cmd.Process.Pid)
	body := batch(20, mb*1_000_000/20)
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, err := post(body)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				codes[-1]++
				return
			}
			codes[code]++
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	rss1, hwm1 := memOf(cmd.Process.Pid)
	var parts []string
	keys := make([]int, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d×%d", codes[k], k))
	}
	fmt.Printf("binary: %s\n", bin)
	fmt.Printf("%d concurrent POST /v1/batch of %.1f MB each (%.0f MB in all), answered in %s: %s\n",
		n, float64(len(body))/1e6, float64(n*len(body))/1e6, elapsed.Round(time.Millisecond), strings.Join(parts, ", "))
	fmt.Printf("server RSS before %.1f MiB (peak %.1f MiB); after %.1f MiB (peak %.1f MiB)\n", mib(rss0), mib(hwm0), mib(rss1), mib(hwm1))
	fmt.Printf("peak RSS growth: %.1f MiB\n", mib(hwm1-hwm0))
	return nil
}

// batch is a /v1/batch body of n entries whose code is a comment of about
// size bytes and a print.
func batch(n, size int) []byte {
	code := "#" + strings.Repeat("x", size) + "\nprint('ok')\n"
	reqs := make([]map[string]any, n)
	for i := range reqs {
		reqs[i] = map[string]any{"code": code}
	}
	b, _ := json.Marshal(map[string]any{"requests": reqs})
	return b
}

func readyURL(r io.Reader) (string, error) {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 512)
	re := regexp.MustCompile(`\[READY\] .* on (http://[0-9.:]+) `)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		k, err := r.Read(tmp)
		buf = append(buf, tmp[:k]...)
		if m := re.FindSubmatch(buf); m != nil {
			return string(m[1]), nil
		}
		if err != nil {
			return "", fmt.Errorf("serve exited: %s", buf)
		}
	}
	return "", fmt.Errorf("no [READY] line: %s", buf)
}

// memOf returns VmRSS and VmHWM of pid, in bytes.
func memOf(pid int) (rss, hwm int64) {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v << 10
		case "VmHWM:":
			hwm = v << 10
		}
	}
	return rss, hwm
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

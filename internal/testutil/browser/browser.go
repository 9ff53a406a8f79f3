// Package browser drives a real headless Chromium from Go tests over the
// DevTools protocol, spoken on the pipes Chromium opens with
// --remote-debugging-pipe (fd 3 in, fd 4 out, one JSON message per NUL).
// That is all a page test needs (navigate, evaluate, screenshot) without a
// WebSocket client or a browser-automation module.
package browser

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Flags are the ones this machine's headless Chromium needs: no sandbox
// (tests run as root), and nothing that reaches for the network by itself.
var Flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
}

// Binary finds Chromium: $PYEXEC_CHROMIUM, else chromium or
// chromium-browser on PATH.
func Binary() (string, error) {
	if p := os.Getenv("PYEXEC_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH (Debian: apt-get install chromium)")
}

// Browser is a running Chromium.
type Browser struct {
	cmd *exec.Cmd
	in  io.WriteCloser // our end of Chromium's fd 3

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan message
	readErr error
	done    chan struct{}
	wmu     sync.Mutex
}

type message struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// Start launches Chromium with a fresh profile; the test fails when it
// cannot (CI installs chromium: a missing browser must not pass quietly).
// It is stopped when the test ends.
func Start(t testing.TB) *Browser {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	b, err := start(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func start(bin, profile string) (*Browser, error) {
	toChrome, ours, err := os.Pipe() // Chromium reads fd 3
	if err != nil {
		return nil, err
	}
	theirs, fromChrome, err := os.Pipe() // Chromium writes fd 4
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, Flags...), "--remote-debugging-pipe", "--user-data-dir="+profile, "about:blank")
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if os.Getenv("PYEXEC_BROWSER_LOG") != "" {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	toChrome.Close()
	fromChrome.Close()
	b := &Browser{cmd: cmd, in: ours, pending: map[int64]chan message{}, done: make(chan struct{})}
	go b.read(theirs)
	return b, nil
}

func (b *Browser) read(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var raw []byte
		raw, err = br.ReadBytes(0)
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil || m.ID == 0 {
			continue // an event: not needed by these tests
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
	b.mu.Lock()
	b.readErr = fmt.Errorf("chromium closed its DevTools pipe: %w", err)
	b.mu.Unlock()
	close(b.done)
}

// call sends one DevTools command and decodes its result into out.
func (b *Browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	if b.readErr != nil {
		err := b.readErr
		b.mu.Unlock()
		return err
	}
	b.nextID++
	id := b.nextID
	ch := make(chan message, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	req, _ := json.Marshal(message{ID: id, Method: method, SessionID: session, Params: p})
	b.wmu.Lock()
	_, err = b.in.Write(append(req, 0))
	b.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-b.done:
		return b.readErr
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Close stops Chromium.
func (b *Browser) Close() {
	b.in.Close() // Chromium exits when its command pipe closes
	exited := make(chan struct{})
	go func() { b.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		b.cmd.Process.Kill()
		<-exited
	}
}

// Page is one tab.
type Page struct {
	b       *Browser
	session string
}

// NewPage opens a tab of width x height CSS pixels.
func (b *Browser) NewPage(ctx context.Context, width, height int) (*Page, error) {
	var created struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank", "newWindow": true, "width": width, "height": height}, &created); err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": created.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: attached.SessionID}
	if err := p.call(ctx, "Page.enable", nil, nil); err != nil {
		return nil, err
	}
	if err := p.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Page) call(ctx context.Context, method string, params, out any) error {
	return p.b.call(ctx, p.session, method, params, out)
}

// Navigate loads url and waits until the document has loaded.
func (p *Page) Navigate(ctx context.Context, url string) error {
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.call(ctx, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("navigate %s: %s", url, nav.ErrorText)
	}
	return p.WaitFor(ctx, `document.readyState === "complete" && location.href !== "about:blank"`)
}

// Eval evaluates a JavaScript expression (awaiting a promise) and decodes
// its value into out (which may be nil).
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res); err != nil {
		return err
	}
	if e := res.ExceptionDetails; e != nil {
		return fmt.Errorf("evaluate %q: %s %s", expr, e.Text, e.Exception.Description)
	}
	if out == nil || len(res.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(res.Result.Value, out)
}

// WaitFor evaluates a boolean expression until it is true or ctx ends (the
// condition is the synchronization: the page is polled, nothing sleeps in
// its place).
func (p *Page) WaitFor(ctx context.Context, expr string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		var ok bool
		if err := p.Eval(ctx, "Boolean("+expr+")", &ok); err != nil {
			last = err
		} else if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %v)", expr, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", expr, ctx.Err())
		case <-tick.C:
		}
	}
}

// Screenshot writes the visible page as a PNG.
func (p *Page) Screenshot(ctx context.Context, path string) error {
	var shot struct {
		Data string `json:"data"`
	}
	if err := p.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/httpapi"
	"github.com/pyexec/pyexec/internal/testutil/browser"
	"github.com/pyexec/pyexec/internal/testutil/gate"
)

// TestAuditPageInChromium drives the audit page in a real headless
// Chromium: without the token it is refused (page and API); with it, the
// page lists a run made by this test and live-tails a running job until its
// end. PYEXEC_SCREENSHOT_DIR=docs keeps the two screenshots.
func TestAuditPageInChromium(t *testing.T) {
	const token = "ui-test-token"
	f := newFixture(t)
	jx := withJobs(t, f.local(t, nil))
	ts, _ := serve(t, jx, func(o *httpapi.Options) {
		o.Token = token
		o.Envs = jx.Engine().Environments().List
	})
	bearer := []string{"Authorization", "Bearer " + token}

	// Refused without the token: the page, its data and its stream.
	for _, path := range []string{"/ui", "/ui/api/activity", "/ui/api/state", "/ui/static/app.js"} {
		if r := do(t, "GET", ts.URL+path, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("GET %s without token: %d %s", path, r.status, r.body)
		}
	}
	if r := do(t, "GET", ts.URL+"/ui?token=wrong", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("GET /ui?token=wrong: %d", r.status)
	}
	// The login cookie is for the page only: it is no bearer token.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login, err := noFollow.Get(ts.URL + "/ui?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	login.Body.Close()
	var cookie string
	for _, c := range login.Header.Values("Set-Cookie") {
		cookie = strings.SplitN(c, ";", 2)[0]
	}
	if login.StatusCode != http.StatusSeeOther || login.Header.Get("Location") != "/ui" || cookie == "" {
		t.Fatalf("login: %d %v", login.StatusCode, login.Header)
	}
	if r := do(t, "GET", ts.URL+"/ui/api/activity", nil, "Cookie", cookie); r.status != http.StatusOK {
		t.Fatalf("GET /ui/api/activity with the page cookie: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", ts.URL+"/v1/jobs", nil, "Cookie", cookie); r.status != http.StatusUnauthorized {
		t.Fatalf("GET /v1/jobs with the page cookie: %d (the cookie must not open the API)", r.status)
	}

	// A sync run and a job that waits for the test before it ends.
	if r := do(t, "POST", ts.URL+"/v1/run", map[string]any{"code": "print('audited run 42')"}, bearer...); r.status != 200 {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", ts.URL+"/v1/run", map[string]any{"code": "import sys\nprint('giving up', file=sys.stderr)\nsys.exit(3)"}, bearer...); r.status != 200 {
		t.Fatalf("failing run: %d %s", r.status, r.body)
	}
	// A live session with two cells, and a file the workspace holds.
	if r := do(t, "POST", ts.URL+"/v1/sessions", map[string]any{"session": "audited-session"}, bearer...); r.status != http.StatusCreated {
		t.Fatalf("session: %d %s", r.status, r.body)
	}
	for _, c := range []string{"x = 1", "x + 1"} {
		if r := do(t, "POST", ts.URL+"/v1/sessions/audited-session/run", map[string]any{"code": c}, bearer...); r.status != 200 {
			t.Fatalf("cell: %d %s", r.status, r.body)
		}
	}
	if err := os.WriteFile(filepath.Join(f.workspace, "audited-file.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := gate.Path(t)
	code := fmt.Sprintf("import os, time\nprint('tail line 1', flush=True)\nwhile not os.path.exists(%q):\n    time.sleep(0.02)\nprint('tail line 2: the end')\n", g)
	var started struct {
		ID string `json:"job_id"`
	}
	r := do(t, "POST", ts.URL+"/v1/jobs", map[string]any{"code": code, "job_label": "tail-me"}, bearer...)
	if r.status != http.StatusAccepted {
		t.Fatalf("start job: %d %s", r.status, r.body)
	}
	r.json(t, &started)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := browser.Start(t)
	page, err := b.NewPage(ctx, 1280, 900)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			var text string
			dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer dcancel()
			page.Eval(dctx, "location.href + '\\n' + document.body.innerText", &text)
			t.Fatalf("%v\npage now:\n%s", err, text)
		}
	}

	must(page.Navigate(ctx, ts.URL+"/ui"))
	var refused string
	must(page.Eval(ctx, `document.getElementById("refused") ? document.getElementById("refused").textContent : document.body.innerText`, &refused))
	if refused != "Token required" {
		t.Fatalf("/ui without token shows %q", refused)
	}

	must(page.Navigate(ctx, ts.URL+"/ui?token="+token))
	var href string
	must(page.Eval(ctx, "location.href", &href))
	if strings.Contains(href, token) {
		t.Fatalf("the token stayed in the address bar: %s", href)
	}
	rowWith := func(text string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#activity tbody tr")].some(tr => tr.innerText.includes(%q))`, text)
	}
	must(page.WaitFor(ctx, rowWith("audited run 42")))
	must(page.WaitFor(ctx, rowWith("tail-me")))
	// Sessions and workspace files have tables of their own.
	must(page.WaitFor(ctx, `[...document.querySelectorAll("#sessions tbody tr")].some(tr => tr.innerText.includes("audited-session") && tr.innerText.includes("idle") && tr.cells[2].innerText === "2")`))
	must(page.WaitFor(ctx, `[...document.querySelectorAll("#files tbody tr")].some(tr => tr.innerText.includes("audited-file.csv") && tr.innerText.includes("file"))`))
	var runRow string
	must(page.Eval(ctx, `[...document.querySelectorAll("#activity tbody tr")].find(tr => tr.innerText.includes("audited run 42")).innerText`, &runRow))
	for _, want := range []string{"run", "completed", "workspace"} {
		if !strings.Contains(runRow, want) {
			t.Fatalf("run row %q lacks %q", runRow, want)
		}
	}
	// The filter hides what does not match.
	must(page.Eval(ctx, `(() => { const f = document.getElementById("filter-text"); f.value = "tail-me"; f.dispatchEvent(new Event("input")); })()`, nil))
	must(page.WaitFor(ctx, `!`+rowWith("audited run 42")+` && `+rowWith("tail-me")))
	must(page.Eval(ctx, `(() => { const f = document.getElementById("filter-text"); f.value = ""; f.dispatchEvent(new Event("input")); })()`, nil))
	must(page.WaitFor(ctx, rowWith("audited run 42")))
	shots := os.Getenv("PYEXEC_SCREENSHOT_DIR")

	// Live tail: open the job, see its first line while it runs, let it
	// finish, see the rest and its end.
	must(page.Eval(ctx, fmt.Sprintf(`[...document.querySelectorAll("#activity tbody tr")].find(tr => tr.dataset.id === %q).click()`, started.ID), nil))
	must(page.WaitFor(ctx, `document.getElementById("job-output").textContent.includes("tail line 1")`))
	must(page.WaitFor(ctx, `document.getElementById("job-live").textContent === "live"`))
	var status string
	must(page.Eval(ctx, `document.getElementById("job-status").textContent`, &status))
	if status != "running" {
		t.Fatalf("job status while it waits: %q", status)
	}
	if shots != "" {
		must(page.Screenshot(ctx, filepath.Join(shots, "ui-live-job.png")))
	}
	if err := os.WriteFile(g, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	must(page.WaitFor(ctx, `document.getElementById("job-output").textContent.includes("tail line 2: the end")`))
	must(page.WaitFor(ctx, `document.getElementById("job-live").textContent === "ended" && document.getElementById("job-status").textContent === "completed"`))
	var meta string
	must(page.Eval(ctx, `document.getElementById("job-meta").textContent`, &meta))
	if !strings.Contains(meta, "exit 0") {
		t.Fatalf("job meta after the end: %q", meta)
	}
	if shots != "" {
		must(page.Eval(ctx, `window.scrollTo(0, 0)`, nil))
		must(page.Screenshot(ctx, filepath.Join(shots, "ui-activity.png")))
	}
}

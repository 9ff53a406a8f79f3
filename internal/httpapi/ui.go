package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/ui"
	"github.com/pyexec/pyexec/internal/workspace"
)

// The audit page (/ui) sits behind the same token as the API. A browser
// cannot send a bearer header when it follows a link, so it logs in once
// with /ui?token=TOKEN: the server checks the token, answers with a cookie
// and redirects to /ui without it. The cookie is not the token (a digest of
// it), is HttpOnly and SameSite=Strict, and is accepted only on /ui routes,
// which only read: it cannot start a run or reach /v1.
const (
	uiCookieName = "pyexec_ui"
	uiCookieLife = 12 * time.Hour
)

// uiFilesListed bounds the workspace entries the audit page shows.
const uiFilesListed = 200

// uiRoutes mounts the audit page.
func (s *Server) uiRoutes(handle func(pattern, name string, o routeOpts, h http.Handler)) {
	o := ui.Options{
		Info: s.opts.Executor.Info,
		Runs: s.runs,
		Envs: s.opts.Envs,
	}
	if s.sx != nil {
		o.Sessions = s.sx.SessionList
	}
	if fx, err := s.files(); err == nil {
		o.Files = func(ctx context.Context) ([]workspace.FileInfo, error) {
			l, err := fx.ListFiles(ctx, executor.ListFilesRequest{Limit: uiFilesListed})
			return l.Entries, err
		}
	}
	if s.jx != nil {
		o.Jobs = s.jx
		o.JobOutput = http.HandlerFunc(s.handleJobOutput)
	}
	h := ui.Handler(o)
	// The live output stream lasts as long as its job: like the API's SSE
	// routes it does not hold off shutdown.
	opts := routeOpts{browser: true, untracked: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/output") }}
	handle(ui.Path, "ui", opts, h)
	handle(ui.Path+"/", "ui", opts, h)
}

// uiCookieValue is what the login cookie holds: a digest of the token, so
// the cookie cannot be replayed as a bearer token against the API.
func (s *Server) uiCookieValue() string {
	sum := sha256.Sum256([]byte("pyexec-ui-cookie\x00" + s.opts.Token))
	return hex.EncodeToString(sum[:])
}

// browserAuthorized reports whether r carries a valid login cookie.
func (s *Server) browserAuthorized(r *http.Request) bool {
	if s.opts.NoAuth {
		return true
	}
	c, err := r.Cookie(uiCookieName)
	if err != nil {
		return false
	}
	want := s.uiCookieValue()
	return subtle.ConstantTimeCompare([]byte(c.Value), []byte(want)) == 1
}

// browserGate handles a request to a /ui route that has neither a bearer
// token nor a cookie: a login with ?token= (cookie, then a redirect that
// drops the token from the address bar), or a refusal page saying how to
// get in. It reports whether it answered.
func (s *Server) browserGate(w http.ResponseWriter, r *http.Request) bool {
	if tok := r.URL.Query().Get("token"); tok != "" {
		got := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(got[:], s.tokenSum[:]) == 1 {
			http.SetCookie(w, &http.Cookie{
				Name: uiCookieName, Value: s.uiCookieValue(), Path: ui.Path,
				MaxAge: int(uiCookieLife.Seconds()), HttpOnly: true, Secure: r.TLS != nil,
				SameSite: http.SameSiteStrictMode,
			})
			q := r.URL.Query()
			q.Del("token")
			target := r.URL.Path
			if len(q) > 0 {
				target += "?" + q.Encode()
			}
			w.Header().Set("Referrer-Policy", "no-referrer")
			http.Redirect(w, r, target, http.StatusSeeOther)
			return true
		}
	}
	if strings.HasPrefix(r.URL.Path, ui.Path+"/api/") || strings.HasPrefix(r.URL.Path, ui.Path+"/static/") {
		return false // JSON 401 from the caller
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(http.StatusUnauthorized)
	_ = refusedPage.Execute(w, nil)
	return true
}

var refusedPage = template.Must(template.New("refused").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>pyexec audit: token required</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:40rem;margin:4rem auto;color:#1d2330}code{background:#f2f4f7;padding:.1rem .3rem}</style></head>
<body><h1 id="refused">Token required</h1>
<p>The pyexec audit page is behind the server's token. Open <code>/ui?token=TOKEN</code> with the
token <code>pyexec serve</code> uses (the one it was given, or the one it generated into
<code>STATE-DIR/server-token</code>; its startup line <code>[AUTH]</code> says which); the address bar then
drops it and a cookie keeps you signed in to this page (read-only) for 12 hours.</p></body></html>
`))

// ctxKey carries the route name to the run log (which front end ran what).
type ctxKey struct{}

func withRoute(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, ctxKey{}, name)
}

// routeOf names the front end a run came through, for the audit page.
func routeOf(ctx context.Context) string {
	switch s, _ := ctx.Value(ctxKey{}).(string); s {
	case "run", "batch":
		return "REST"
	case "execute":
		return "/execute"
	case "mcp":
		return "MCP"
	case "":
		return "API"
	default:
		return s
	}
}

// recordBatch adds each entry of a finished batch to the run log.
func (a *admitted) recordBatch(ctx context.Context, start time.Time, req executor.BatchRequest, out executor.BatchResult) {
	for _, it := range out.Results {
		if it.Index < 0 || it.Index >= len(req.Requests) || it.JobID != "" {
			continue
		}
		var err error
		if it.Error != "" {
			err = batchEntryError(it.Error)
		}
		a.runs.Add(routeOf(ctx)+" batch", start, req.Requests[it.Index], it.Result, err)
	}
}

type batchEntryError string

func (e batchEntryError) Error() string { return string(e) }

package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/pyexec/pyexec/internal/engine"
)

// smallBodyLimit bounds the bodies of requests that carry no code (an
// environment to create, a prune).
const smallBodyLimit = 1 << 20

// DefaultBodyBudget is how many bytes of request bodies the server holds
// at once by default (Options.BodyBudget).
const DefaultBodyBudget = 64 << 20

// bodyBudget bounds the bytes of request bodies in flight: read, being
// read, or held by the handler that decoded them (a sync run keeps its
// request until it answers). Why: every body becomes memory, and nothing
// else bounded how many large ones were in memory together (24 concurrent
// 20 MB batches grew the server by about 900 MiB). A body is charged before
// it is read, by its Content-Length, or as it streams in when it has none;
// one that does not fit is refused at once (429, Retry-After) without
// reading it.
type bodyBudget struct {
	limit int64

	mu   sync.Mutex
	used int64
}

func (b *bodyBudget) tryAcquire(n int64) bool {
	if n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *bodyBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func (b *bodyBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// BodyBudgetError is a request refused because the server already holds
// its budget of request bodies.
type BodyBudgetError struct {
	Size, InUse, Limit int64
}

func (e *BodyBudgetError) Error() string {
	size := "a body of unknown length"
	if e.Size > 0 {
		size = "a " + engine.FormatBytes(e.Size) + " body"
	}
	return fmt.Sprintf("server busy: it holds %s of request bodies already (its budget is %s, --max-body-memory), so %s does not fit now; retry shortly",
		engine.FormatBytes(e.InUse), engine.FormatBytes(e.Limit), size)
}

func (e *BodyBudgetError) Is(target error) bool { return target == errBusy }

// admitBody charges r's body to the budget. It returns the request to
// serve (its body metered when its length is unknown) and a release to
// call when the handler is done, or an error to answer with.
func (s *Server) admitBody(w http.ResponseWriter, r *http.Request) (*http.Request, func(), error) {
	b := s.bodies
	if b == nil || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return r, func() {}, nil
	}
	if n := r.ContentLength; n > 0 {
		if !b.tryAcquire(n) {
			return r, nil, &BodyBudgetError{Size: n, InUse: b.inUse(), Limit: b.limit}
		}
		return r, func() { b.release(n) }, nil
	}
	// Chunked: charged as it arrives.
	m := &meteredBody{ReadCloser: r.Body, b: b}
	r2 := r.Clone(r.Context())
	r2.Body = m
	return r2, m.releaseAll, nil
}

// meteredBody charges a body of unknown length chunk by chunk; a chunk that
// does not fit ends the read with a BodyBudgetError.
type meteredBody struct {
	io.ReadCloser
	b       *bodyBudget
	mu      sync.Mutex
	charged int64
}

func (m *meteredBody) Read(p []byte) (int, error) {
	n, err := m.ReadCloser.Read(p)
	if n > 0 {
		if !m.b.tryAcquire(int64(n)) {
			return 0, &BodyBudgetError{InUse: m.b.inUse(), Limit: m.b.limit}
		}
		m.mu.Lock()
		m.charged += int64(n)
		m.mu.Unlock()
	}
	return n, err
}

func (m *meteredBody) releaseAll() {
	m.mu.Lock()
	n := m.charged
	m.charged = 0
	m.mu.Unlock()
	m.b.release(n)
}

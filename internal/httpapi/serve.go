package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Server-side HTTP timeouts. There is deliberately no WriteTimeout: a sync
// run may last up to the server's maximum timeout. Each response write is
// bounded instead (writeGrace), headers and bodies must arrive promptly
// (slow-loris safe), and idle keep-alive connections are closed.
const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultReadTimeout       = 2 * time.Minute // whole request including a large body
	idleTimeout              = 2 * time.Minute
	maxHeaderBytes           = 64 << 10
	// DefaultShutdownGrace is how long running sync calls may finish after
	// SIGTERM before they are cancelled (their process trees killed).
	DefaultShutdownGrace = 30 * time.Second
)

// HTTPServer returns an http.Server for this server with pyexec's timeouts.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          nil,
	}
}

// Serve serves on ln until ctx is cancelled, then shuts down gracefully:
// it stops accepting, answers 503 to new requests on open connections, lets
// calls in progress finish for up to grace, then closes MCP sessions and
// every connection (cancelling what still runs, which kills those runs'
// process trees).
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	hs := s.HTTPServer()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return s.shutdown(hs, errc, grace)
}

func (s *Server) shutdown(hs *http.Server, errc <-chan error, grace time.Duration) error {
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	s.draining.Store(true)
	s.log.Info("shutting down: no new requests; waiting for running calls", "grace", grace)
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	shutdownDone := make(chan error, 1)
	// Shutdown closes the listeners at once and then waits for connections
	// to go idle.
	go func() { shutdownDone <- hs.Shutdown(graceCtx) }()
	select {
	case <-s.active.idle():
	case <-graceCtx.Done():
		s.log.Warn("shutdown grace period over: cancelling the calls still running")
	}
	s.closeMCPSessions()
	// What is left is MCP's long-lived GET streams or calls past the grace
	// period; closing cancels their contexts.
	closeErr := hs.Close()
	<-shutdownDone
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return closeErr
}

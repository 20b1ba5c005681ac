package ratelimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// settleWriter is the ResponseWriter that Limiter.Handler gives the
// handler of a request admitted under a rule that settles costs: the
// writer it was given, with the state that Settle reaches through the
// writer's Unwrap chain, and on the direct path the response's two field
// slices, whose strings are shared as a plain rule's are (the rule's cache
// or a hot key's run; see allowedIn). The request is passed on unchanged,
// so admitting it copies nothing of it. It is the one allocation of a
// settled request, kept to 64 bytes.
//
// Like net/http's own writer, it must not be used once its handler has
// returned. One that is (a goroutine the handler left it to) is harmless:
// each settleWriter serves a single request and is never reused, so a
// late Settle finds its own request served and reaches no other.
type settleWriter struct {
	http.ResponseWriter
	settleState
	vals [2]string // RateLimit-Policy, RateLimit
}

// Unwrap returns the writer w wraps: for http.ResponseController, and for
// Settle, which reaches every limiter around this one through it.
func (w *settleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush sends what was written so far, when the writer underneath can:
// for handlers that stream (http.Flusher).
func (w *settleWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// FlushError is Flush with its error, for http.ResponseController.
func (w *settleWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over, when the writer underneath can.
func (w *settleWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// ReadFrom copies src to the response through the writer underneath, so
// that a file served under a settled rule still goes out as the writer
// underneath would send it (sendfile, with net/http's).
func (w *settleWriter) ReadFrom(src io.Reader) (int64, error) {
	return io.Copy(w.ResponseWriter, src)
}

// newSettleWriter returns a settleWriter around w, with nothing settled.
// Each is allocated on its own: handing them out a block at a time from a
// sync.Pool cost more at two processors (the pool's Get and Put, and a
// 2 KiB block's allocation and clearing) than the small allocation it
// saved.
func newSettleWriter(w http.ResponseWriter) *settleWriter {
	return &settleWriter{ResponseWriter: w}
}

// settleWriter returns w wrapped in a settleWriter that carries h's state,
// for the handler's Settle, when the limiter settles costs. h is the
// middleware's own, fresh from its admission: never carried before.
func (l *Limiter) settleWriter(w http.ResponseWriter, h *held) http.ResponseWriter {
	if !l.settled || h == nil {
		return w
	}
	sw := newSettleWriter(w)
	h.adopt(&sw.settleState)
	return sw
}

// maxUnwraps bounds the writers Settle unwraps, so that a writer whose
// Unwrap returns itself (or a cycle of them) cannot hold it forever.
const maxUnwraps = 64

// settleWriters reports actual to the state of every settleWriter in w's
// Unwrap chain, and whether one of them had a rule still to settle.
func settleWriters(w http.ResponseWriter, actual int) bool {
	ok := false
	for range maxUnwraps {
		switch t := w.(type) {
		case *settleWriter:
			ok = t.report(actual) || ok
			w = t.ResponseWriter
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return ok
		}
	}
	return ok
}

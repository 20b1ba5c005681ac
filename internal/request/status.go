// Package request records what a handler did with the response writer it
// was given: the status it wrote, for middleware that passes a request on
// and then needs its outcome (an adaptive concurrency limit classifies
// each response by it).
//
// It knows nothing of the limiter. The package is internal to
// github.com/sluicehq/ratelimit.
package request

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/sluicehq/ratelimit/internal/blocks"
)

// StatusWriter is a ResponseWriter that records the status written through
// it. It passes Flush and Hijack through, and Unwrap serves
// http.ResponseController.
//
// Take one with NewStatusWriter for one call of a handler, and Close it
// once that call has returned. As with net/http's own writer, a handler
// must not use it after returning; one that does (a goroutine it handed
// the writer to) is harmless: each StatusWriter serves a single response
// and is never reused, so a late write can only reach the response it was
// given for, and once closed it reaches no response at all.
type StatusWriter struct {
	http.ResponseWriter
	status int32
	closed atomic.Bool
}

// ErrClosed is what a write through a StatusWriter returns once its
// handler has returned.
var ErrClosed = errors.New("ratelimit: ResponseWriter used after its handler returned")

// writers hands out StatusWriters 64 at a time: recording a status costs
// a sixty-fourth of an allocation, and no writer is ever given to two
// requests.
var writers = blocks.New[StatusWriter](blockSize)

// blockSize is how many StatusWriters are allocated at once.
const blockSize = 64

// NewStatusWriter returns a StatusWriter around w, with no status yet.
func NewStatusWriter(w http.ResponseWriter) *StatusWriter {
	s := writers.Get()
	s.ResponseWriter = w
	return s
}

// Close marks s's handler as returned: from then on its writes do nothing.
// It returns the status written, 0 if none.
func (s *StatusWriter) Close() int {
	s.closed.Store(true)
	return int(s.status)
}

// WriteHeader records code, the first final (2xx-5xx) status written, and
// passes it on.
func (s *StatusWriter) WriteHeader(code int) {
	if s.closed.Load() {
		return
	}
	if s.status == 0 && code >= 200 {
		s.status = int32(code)
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write records 200 if no status was written before, as net/http does.
func (s *StatusWriter) Write(b []byte) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Status returns the status written, 0 if none yet.
func (s *StatusWriter) Status() int { return int(s.status) }

// Header returns the header map of the response, or, once s is closed, a
// map of its own that no response reads.
func (s *StatusWriter) Header() http.Header {
	if s.closed.Load() {
		return http.Header{}
	}
	return s.ResponseWriter.Header()
}

// Unwrap returns the writer s wraps, for http.ResponseController; nil
// once s is closed (the controller then reports http.ErrNotSupported).
func (s *StatusWriter) Unwrap() http.ResponseWriter {
	if s.closed.Load() {
		return nil
	}
	return s.ResponseWriter
}

// FlushError sends what was written so far, and with it a 200 if no
// status was written. http.ResponseController calls it for Flush.
func (s *StatusWriter) FlushError() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return http.NewResponseController(s.ResponseWriter).Flush()
}

// Flush is FlushError for callers of http.Flusher.
func (s *StatusWriter) Flush() { _ = s.FlushError() }

// Hijack hands the connection over, when the writer underneath can.
func (s *StatusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if s.closed.Load() {
		return nil, nil, ErrClosed
	}
	return http.NewResponseController(s.ResponseWriter).Hijack()
}

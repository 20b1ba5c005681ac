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
	"net"
	"net/http"
	"sync"
)

// StatusWriter is a ResponseWriter that records the status written through
// it. It passes Flush and Hijack through, and Unwrap serves
// http.ResponseController.
//
// Take one with NewStatusWriter and give it back with Free once the handler
// it was given to has returned: StatusWriters are reused, so that
// recording a status allocates nothing. Like net/http's own writer, it must
// not be used once its handler has returned: after Free it panics while it
// waits in the pool, and once taken again it writes to the response of the
// request it then serves.
type StatusWriter struct {
	http.ResponseWriter
	status int
}

var statusWriters = sync.Pool{New: func() any { return new(StatusWriter) }}

// NewStatusWriter returns a StatusWriter around w, with no status yet.
func NewStatusWriter(w http.ResponseWriter) *StatusWriter {
	s := statusWriters.Get().(*StatusWriter)
	s.ResponseWriter, s.status = w, 0
	return s
}

// Free gives s back for reuse; s must not be used after.
func (s *StatusWriter) Free() {
	s.ResponseWriter, s.status = nil, 0
	statusWriters.Put(s)
}

// WriteHeader records code, the first final (2xx-5xx) status written, and
// passes it on.
func (s *StatusWriter) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write records 200 if no status was written before, as net/http does.
func (s *StatusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Status returns the status written, 0 if none yet.
func (s *StatusWriter) Status() int { return s.status }

// Unwrap returns the writer s wraps, for http.ResponseController.
func (s *StatusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush sends what was written so far, and with it a 200 if no status was
// written.
func (s *StatusWriter) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Hijack hands the connection over, when the writer underneath can.
func (s *StatusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(s.ResponseWriter).Hijack()
}

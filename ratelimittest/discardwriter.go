package ratelimittest

import "net/http"

// DiscardWriter is a reusable http.ResponseWriter that keeps the status and
// the header and discards the body, so that a benchmark of middleware
// measures the middleware rather than httptest.ResponseRecorder. Create one
// with NewDiscardWriter and call Reset between requests; it is not safe for
// concurrent use (give each goroutine of b.RunParallel its own).
type DiscardWriter struct {
	// Code is the first status written, 0 until the handler writes one.
	Code   int
	header http.Header
	guards [2]http.Header // see NewDiscardWriter
	// Writers of parallel goroutines, written on every request, each fill
	// a cache line of their own, so that a benchmark measures no false
	// sharing between them or with the handler's data.
	_ [32]byte
}

// NewDiscardWriter returns an empty DiscardWriter.
//
// Its header map is allocated between two maps that it keeps and never
// writes. The runtime's header of a map (48 bytes) and a small map's slot
// group (352 bytes) are written by every assignment and clear, and those
// of maps allocated one after the other are packed: two goroutines'
// writers made in a row would otherwise share cache lines, and a
// benchmark that happened to lay them out so would measure their false
// sharing in every request (tens of nanoseconds, in one process and not
// the next). The second guard has a group of its own, which lies between
// this writer's group and the next writer's.
func NewDiscardWriter() *DiscardWriter {
	w := &DiscardWriter{}
	w.guards[0] = make(http.Header)
	w.header = make(http.Header, 8)
	w.guards[1] = make(http.Header, 8)
	return w
}

// Header returns the response header.
func (w *DiscardWriter) Header() http.Header { return w.header }

// Write discards b, recording status 200 if none was written.
func (w *DiscardWriter) Write(b []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return len(b), nil
}

// WriteHeader records code unless a status was already written.
func (w *DiscardWriter) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
}

// Reset clears the header (keeping its storage) and the status.
func (w *DiscardWriter) Reset() {
	clear(w.header)
	w.Code = 0
}

// Status is the status written, 200 if the handler wrote nothing.
func (w *DiscardWriter) Status() int {
	if w.Code == 0 {
		return http.StatusOK
	}
	return w.Code
}

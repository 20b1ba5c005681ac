package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
)

// DiscardWriter is a reusable http.ResponseWriter that keeps the status and
// discards the body, so that benchmarks measure the middleware rather than
// httptest.ResponseRecorder. Clear H between requests.
type DiscardWriter struct {
	H    http.Header
	Code int
}

func (w *DiscardWriter) Header() http.Header { return w.H }

func (w *DiscardWriter) Write(b []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return len(b), nil
}

func (w *DiscardWriter) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
}

// Reset clears the header map and the status for the next request.
func (w *DiscardWriter) Reset() {
	clear(w.H)
	w.Code = 0
}

// Status is the status written, 200 if the handler wrote nothing.
func (w *DiscardWriter) Status() int {
	if w.Code == 0 {
		return http.StatusOK
	}
	return w.Code
}

// IP returns the i-th of the distinct IPv4 client addresses the benchmarks
// use (10.0.0.0/8), without the port.
func IP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
}

// Requests returns n pre-built GET requests from n distinct client IPs.
func Requests(n int) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/api/items", nil)
		reqs[i].RemoteAddr = IP(i) + ":1234"
	}
	return reqs
}

// OK is the trivial handler behind every middleware.
var OK = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })

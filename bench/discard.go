package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
)

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

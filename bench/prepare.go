package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/sluicehq/ratelimit/ratelimittest"
)

// Case is one benchmark workload: the allow or the deny path, over a number
// of distinct client keys.
type Case struct {
	Deny bool
	Keys int
}

func (c Case) String() string {
	path := "allow"
	if c.Deny {
		path = "deny"
	}
	return fmt.Sprintf("%s/keys=%d", path, c.Keys)
}

// Cases are the four workloads of the middleware benchmark.
var Cases = []Case{{false, 1}, {false, 10_000}, {true, 1}, {true, 10_000}}

// Prepared is a library's middleware ready to be timed on a Case: the
// handler, the requests (one per key) and the status every request must get.
type Prepared struct {
	Handler http.Handler
	Reqs    []*http.Request
	Want    int
	Close   func()
}

// Prepare builds lib's middleware for c and checks, before any timing, that
// it behaves as the case claims: on the allow path every key gets 200; on
// the deny path (1 per hour) the first request of every key gets 200 (so the
// keys are really distinct buckets) and the next one 429. Every response must
// carry the library's rate-limit headers.
func Prepare(lib Library, c Case) (*Prepared, error) {
	limit := Unlimited
	want := http.StatusOK
	if c.Deny {
		limit, want = OnePerHour, http.StatusTooManyRequests
	}
	h, closeFn := lib.Middleware(limit, OK)
	p := &Prepared{Handler: h, Reqs: Requests(c.Keys), Want: want, Close: closeFn}
	w := ratelimittest.NewDiscardWriter()
	for i, r := range p.Reqs {
		w.Reset()
		h.ServeHTTP(w, r)
		if w.Status() != http.StatusOK {
			closeFn()
			return nil, fmt.Errorf("%s %v: first request of key %d (%s) got %d, want 200", lib.Name, c, i, r.RemoteAddr, w.Status())
		}
		if !HasRateLimitHeader(w.Header()) {
			closeFn()
			return nil, fmt.Errorf("%s %v: no rate-limit header on an allowed response: %v", lib.Name, c, w.Header())
		}
	}
	for i, r := range p.Reqs {
		w.Reset()
		h.ServeHTTP(w, r)
		if w.Status() != want {
			closeFn()
			return nil, fmt.Errorf("%s %v: second request of key %d (%s) got %d, want %d", lib.Name, c, i, r.RemoteAddr, w.Status(), want)
		}
		if !HasRateLimitHeader(w.Header()) {
			closeFn()
			return nil, fmt.Errorf("%s %v: no rate-limit header on a %d response: %v", lib.Name, c, want, w.Header())
		}
	}
	return p, nil
}

// HasRateLimitHeader reports whether h has a rate-limit field of any of the
// libraries' styles (RateLimit, X-RateLimit-*, X-Rate-Limit-*).
func HasRateLimitHeader(h http.Header) bool {
	for k := range h {
		k = strings.ToLower(k)
		if strings.HasPrefix(k, "ratelimit") || strings.HasPrefix(k, "x-ratelimit") || strings.HasPrefix(k, "x-rate-limit") {
			return true
		}
	}
	return false
}

// CheckKeying checks that lib keys by the client IP of RemoteAddr: under 1
// per hour, key A's first request passes, a second one from A on another
// port gets 429, and key B's first request still passes.
func CheckKeying(lib Library) error {
	h, closeFn := lib.Middleware(OnePerHour, OK)
	defer closeFn()
	steps := []struct {
		addr string
		want int
	}{
		{"192.0.2.1:1111", 200},
		{"192.0.2.1:2222", 429},
		{"192.0.2.2:1111", 200},
		{"192.0.2.2:3333", 429},
		{"192.0.2.1:4444", 429},
	}
	for i, s := range steps {
		r := httptest.NewRequest("GET", "/api/items", nil)
		r.RemoteAddr = s.addr
		// A header a spoofable extractor would read: it must be ignored.
		r.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i))
		w := ratelimittest.NewDiscardWriter()
		h.ServeHTTP(w, r)
		if w.Status() != s.want {
			return fmt.Errorf("%s: request %d from %s got %d, want %d", lib.Name, i, s.addr, w.Status(), s.want)
		}
	}
	return nil
}

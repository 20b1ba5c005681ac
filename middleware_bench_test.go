package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// BenchmarkMiddleware measures the full round trip through the middleware
// (key, store, headers, and the 429 body on the deny path) in parallel, for
// one hot key and for 10,000 distinct client IPs.
func BenchmarkMiddleware(b *testing.B) {
	always := ratelimit.Limit{Rate: 1e9, Period: time.Second}
	for _, path := range []string{"allow", "deny"} {
		for _, keys := range []int{1, 10_000} {
			b.Run(fmt.Sprintf("%s/keys=%d", path, keys), func(b *testing.B) {
				limit := always
				if path == "deny" {
					limit = ratelimit.PerHour(1)
				}
				next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
				h := ratelimit.New(limit, ratelimit.ByIP())(next)
				reqs := make([]*http.Request, keys)
				for i := range reqs {
					reqs[i] = httptest.NewRequest("GET", "/api/items", nil)
					reqs[i].RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
					h.ServeHTTP(ratelimittest.NewDiscardWriter(), reqs[i]) // drains the deny path's keys
				}
				want := 200
				if path == "deny" {
					want = 429
				}
				var seq atomic.Uint64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					w := ratelimittest.NewDiscardWriter()
					i := int(seq.Add(7919))
					for pb.Next() {
						w.Reset()
						i++
						h.ServeHTTP(w, reqs[i%keys])
						if w.Status() != want {
							b.Errorf("status %d, want %d", w.Status(), want)
							return
						}
					}
				})
			})
		}
	}
}

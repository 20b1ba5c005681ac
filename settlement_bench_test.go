package ratelimit_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// BenchmarkSettledHandler measures Limiter.Handler under a settled rule
// (estimate 1) on the in-process store, whose handler settles its
// estimate (nothing to charge), more (a charge) or less (a refund), over
// one client and 1,000 in parallel.
func BenchmarkSettledHandler(b *testing.B) {
	for _, c := range []struct {
		name   string
		actual int
	}{{"estimate", 1}, {"more", 3}, {"less", 0}} {
		for _, clients := range []int{1, 1000} {
			b.Run(fmt.Sprintf("%s/clients=%d", c.name, clients), func(b *testing.B) {
				h := ratelimit.NewRules([]ratelimit.Rule{{Name: "tokens", Limit: ratelimit.Limit{Rate: 1e9, Period: time.Second},
					Key: ratelimit.ByIP(), Settled: true}})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					ratelimit.Settle(r.Context(), w, c.actual)
				}))
				reqs := make([]*http.Request, clients)
				for i := range reqs {
					reqs[i] = clientReq(i)
				}
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					w := ratelimittest.NewDiscardWriter()
					i := 0
					for pb.Next() {
						w.Reset()
						i++
						h.ServeHTTP(w, reqs[i%len(reqs)])
						if w.Status() != http.StatusOK {
							b.Error("denied")
							return
						}
					}
				})
			})
		}
	}
}

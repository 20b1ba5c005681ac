package ratelimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestStackedRulesAllocations: a rate stacked on a daily quota, the
// configuration users write most after a single rule, costs an allowed
// request at most one allocation (its fields) and a denied one at most
// one: the quota's policy item and its window are worked out once, not
// per request.
func TestStackedRulesAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: allocation counts say nothing")
	}
	for _, c := range []struct {
		name  string
		limit ratelimit.Limit
		want  int
		max   float64
	}{
		{"allow", ratelimit.Limit{Rate: 1e9, Period: time.Second}, http.StatusOK, 1},
		{"deny", ratelimit.PerHour(1), http.StatusTooManyRequests, 1},
	} {
		h := ratelimit.NewRules([]ratelimit.Rule{
			{Name: "rate", Limit: c.limit, Key: ratelimit.ByIP()},
			{Name: "daily", Quota: ratelimit.Daily(1_000_000_000, time.UTC), Key: ratelimit.ByIP()},
		})(okHandler)
		reqs := make([]*http.Request, 100)
		for i := range reqs {
			reqs[i] = clientReq(i)
			h.ServeHTTP(ratelimittest.NewDiscardWriter(), reqs[i])
		}
		w := ratelimittest.NewDiscardWriter()
		i := 0
		got := testing.AllocsPerRun(2000, func() {
			w.Reset()
			h.ServeHTTP(w, reqs[i%len(reqs)])
			i++
		})
		if w.Status() != c.want {
			t.Fatalf("%s: status %d, want %d", c.name, w.Status(), c.want)
		}
		if got > c.max {
			t.Errorf("%s: %.1f allocations per request, want at most %.0f", c.name, got, c.max)
		}
	}
}

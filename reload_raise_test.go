package ratelimit_test

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestReloadableRaisedLimitGivesStuckClientsTheNewHeadroomAtOnce is the
// incident: a client used all of PerMinute(5), the rule is reloaded with
// PerMinute(20) within the same minute, and the client has 15 more
// requests at once, on the in-process store (whose single static rule takes
// the direct path) and on stores/memory, for every rate algorithm.
func TestReloadableRaisedLimitGivesStuckClientsTheNewHeadroomAtOnce(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow} {
		for _, st := range []struct {
			name string
			new  func(ratelimit.Clock) ratelimit.Store
		}{
			{"in-process", ratelimit.NewMemoryStoreAt},
			{"stores/memory", func(c ratelimit.Clock) ratelimit.Store { return memory.New(memory.WithClock(c)) }},
		} {
			t.Run(alg.String()+"/"+st.name, func(t *testing.T) {
				clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				store := st.new(clock)
				build := func(l ratelimit.Limit) *ratelimit.Limiter {
					return ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "api", Limit: l, Key: ratelimit.Global(), Algorithm: alg}},
						ratelimit.WithStore(store), ratelimit.WithClock(clock))
				}
				h := ratelimit.NewReloadable(build(ratelimit.PerMinute(5)))
				mw := h.Handler(ok)
				admitted := func() int {
					n := 0
					for n <= 20 && ratelimittest.Do(mw, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1")).Code == 200 {
						n++
					}
					return n
				}
				if n := admitted(); n != 5 {
					t.Fatalf("PerMinute(5): %d admitted, want 5", n)
				}
				clock.Advance(10 * time.Second)
				h.Store(build(ratelimit.PerMinute(20)))
				if n := admitted(); n != 15 {
					t.Fatalf("after the reload to PerMinute(20), 10s later: %d more admitted, want 15", n)
				}
			})
		}
	}
}

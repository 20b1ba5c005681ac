package memory_test

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestExtremeLimitsGiveBoundedResults: limits at the edges of what
// Validate accepts (2^31-1 events, fifty-year periods, a Period of 2^31-1
// nanoseconds) give results in range under every algorithm, for costs of
// zero, one and the whole capacity, at times an hour apart and out of order.
func TestExtremeLimitsGiveBoundedResults(t *testing.T) {
	const maxC = 1<<31 - 1
	const far = time.Duration(1 << 62)
	fifty := 50 * 365 * 24 * time.Hour
	limits := []stores.Limit{
		{Rate: maxC, Period: fifty, Burst: maxC},
		{Rate: maxC, Period: fifty},
		{Rate: 1, Period: fifty, Burst: 2},
		{Rate: maxC, Period: time.Duration(maxC)},
		{Rate: 3, Period: fifty},
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	offsets := []time.Duration{0, 59 * time.Minute, 17 * time.Minute, time.Hour, 3 * time.Minute} // out of order
	for _, lim := range limits {
		if err := lim.Validate(); err != nil {
			t.Fatalf("%v rejected: %v", lim, err)
		}
		for alg := stores.GCRA; alg <= stores.Concurrency; alg++ {
			l := lim
			if alg != stores.GCRA {
				l.Burst = 0
			}
			s := memory.New()
			for i, c := range []int{l.Capacity(), 1, l.Capacity(), 0, 1} {
				at := now.Add(offsets[i])
				res, err := s.TakeAt(at, stores.Request{Key: "k", Limit: l, Algorithm: alg, Cost: c})
				if err != nil {
					t.Fatalf("%v %v cost %d: %v", l, alg, c, err)
				}
				if res.Remaining < 0 || res.Remaining > l.Capacity() || res.RetryAfter < 0 || res.ResetAfter < 0 ||
					res.RetryAfter > far || res.ResetAfter > far {
					t.Errorf("%v %v cost %d: out of range: %+v", l, alg, c, res)
				}
				if err := s.ReturnAt(at, stores.Request{Key: "k", Limit: l, Algorithm: alg, Cost: 1}); err != nil {
					t.Fatalf("%v %v: ReturnAt: %v", l, alg, err)
				}
			}
		}
	}
}

// Package difftest holds the differential tests that every adapter over the
// in-process engine runs: the root package's private default store and
// stores/memory. Running the same tests on both keeps the two adapters from
// drifting apart.
package difftest

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// NewStore makes a fresh store that reads time from clock.
type NewStore func(clock stores.Clock) stores.Store

// GCRAMatchesXTimeRate replays random timelines through the store's GCRA and
// through golang.org/x/time/rate's token bucket, which describe the same
// limiter, and requires the same decision for every request and the same
// remaining count (floor of the tokens left).
func GCRAMatchesXTimeRate(t *testing.T, newStore NewStore) {
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var allowedN, deniedN int
	for run := 0; run < 300; run++ {
		// A whole number of nanoseconds per event keeps both sides exact.
		interval := time.Duration(1+rng.IntN(1000)) * time.Millisecond / time.Duration(1+rng.IntN(8))
		ratePer := 1 + rng.IntN(50)
		limit := stores.Limit{Rate: ratePer, Period: interval * time.Duration(ratePer), Burst: 1 + rng.IntN(20)}
		ref := rate.NewLimiter(rate.Every(interval), limit.Burst)
		clock := ratelimittest.NewClock(start)
		store := newStore(clock)
		req := stores.Request{Key: "k", Limit: limit}
		for i := 0; i < 200; i++ {
			// Random gaps from nothing to a few intervals, at nanosecond
			// resolution so that exact ties (where float rounding in x/time/rate
			// could tip either way) are vanishingly rare.
			now := clock.Advance(time.Duration(rng.Int64N(int64(3 * interval))))
			req.Cost = 1 + rng.IntN(limit.Burst)
			got, err := store.Take(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := ref.AllowN(now, req.Cost)
			if want {
				allowedN++
			} else {
				deniedN++
			}
			if got.Allowed != want {
				t.Fatalf("run %d (%v), request %d (cost %d): store allowed=%v, x/time/rate allowed=%v",
					run, limit, i, req.Cost, got.Allowed, want)
			}
			tokens := ref.TokensAt(now)
			if math.Abs(tokens-math.Round(tokens)) < 1e-6 {
				continue // on an integer boundary float rounding decides
			}
			if got.Remaining != int(math.Floor(tokens)) {
				t.Fatalf("run %d (%v), request %d: remaining %d, x/time/rate has %.6f tokens",
					run, limit, i, got.Remaining, tokens)
			}
		}
	}
	if allowedN < 10_000 || deniedN < 10_000 {
		t.Fatalf("timelines too one-sided to compare: %d allowed, %d denied", allowedN, deniedN)
	}
}

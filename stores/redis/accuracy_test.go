package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestAccuracyFourInstances: four Stores on four clients, as four
// processes would be, share one Redis and one hot key under concurrent
// load, with coalescing and the denied cache on. Time moves in rounds (a
// shared test clock stands still during a round, so that every round's
// outcome is determined): 32 goroutines saturate the key in every round.
//
// Exact modes admit in every round exactly what one memory store admits
// given the same attempts, so never more than the limit in any trailing
// window. Lease mode (fraction 0.005, 5 units per lease) admits in every
// trailing window at most the exact bound plus 4×5 units, that is within
// 2% of the limit, and in all at least 98% of what the exact mode admits.
func TestAccuracyFourInstances(t *testing.T) {
	requireShared(t)
	cases := []struct {
		name  string
		alg   stores.Algorithm
		limit stores.Limit
		step  time.Duration
		lease bool
	}{
		{"gcra", ratelimit.GCRA, ratelimit.PerSecond(100), 30 * time.Millisecond, false},
		{"sliding-window", ratelimit.SlidingWindow, ratelimit.PerSecond(100), 70 * time.Millisecond, false},
		{"fixed-window", ratelimit.FixedWindow, ratelimit.PerSecond(100), 70 * time.Millisecond, false},
		{"sliding-log", ratelimit.SlidingLog, ratelimit.PerSecond(100), 70 * time.Millisecond, false},
		{"gcra-lease", ratelimit.GCRA, ratelimit.PerSecond(1000), 20 * time.Millisecond, true},
	}
	const instances, workers, rounds = 4, 8, 30
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clock := ratelimittest.NewClock(ratelimittest.Epoch())
			prefix := uniquePrefix(t)
			peers := make([]*Store, instances)
			for i := range peers {
				client := redis.NewClient(&redis.Options{Addr: sharedServer.Addr})
				t.Cleanup(func() { client.Close() })
				opts := []Option{WithClock(clock), WithPrefix(prefix)}
				if c.lease {
					opts = append(opts, WithLease(0.005, time.Second))
				}
				peers[i] = newStore(client, opts...)
			}
			ref := memory.New(memory.WithClock(clock))
			req := withAlg(gcraReq("hot", c.limit, 1), c.alg)

			admitted := make([]int, rounds)
			want := make([]int, rounds)
			for r := range rounds {
				// Enough attempts to exhaust the key in every round.
				each := 1 + c.limit.Capacity()/(instances*workers)
				if r > 0 {
					each = 3
				}
				var n atomic.Int64
				var wg sync.WaitGroup
				for _, s := range peers {
					for range workers {
						wg.Go(func() {
							for range each {
								res, err := s.Take(ctx, req)
								if err != nil {
									t.Error(err)
									return
								}
								if res.Allowed {
									n.Add(1)
								}
							}
						})
					}
				}
				wg.Wait()
				admitted[r] = int(n.Load())
				for range instances * workers * each {
					if res, _ := ref.Take(ctx, req); res.Allowed {
						want[r]++
					}
				}
				if !c.lease && admitted[r] != want[r] {
					t.Fatalf("round %d: %d admitted, the exact answer is %d", r, admitted[r], want[r])
				}
				clock.Advance(c.step)
			}

			total, wantTotal := 0, 0
			for r := range rounds {
				total += admitted[r]
				wantTotal += want[r]
			}
			var st Stats
			for _, s := range peers {
				x := s.Stats()
				st.RoundTrips += x.RoundTrips
				st.Sent += x.Sent
				st.DeniedCacheHits += x.DeniedCacheHits
				st.LeaseHits += x.LeaseHits
			}
			t.Logf("%d admitted (exact: %d), %+v", total, wantTotal, st)
			if !c.lease {
				return
			}
			// Every trailing window of k rounds: at most the exact bound
			// (capacity plus the refill over the window) plus 4 leases.
			interval := c.limit.Interval()
			lease := 5
			for a := range rounds {
				sum := 0
				for b := a; b < rounds; b++ {
					sum += admitted[b]
					span := time.Duration(b-a) * c.step
					bound := c.limit.Capacity() + int(span/interval)
					if sum > bound+instances*lease {
						t.Fatalf("rounds %d..%d: %d admitted, bound %d + %d leased", a, b, sum, bound, instances*lease)
					}
					if float64(sum) > 1.02*float64(bound) {
						t.Fatalf("rounds %d..%d: %d admitted, more than 2%% above the bound %d", a, b, sum, bound)
					}
				}
			}
			if float64(total) < 0.98*float64(wantTotal) {
				t.Errorf("lease mode admitted %d, under 98%% of the exact %d", total, wantTotal)
			}
		})
	}
}

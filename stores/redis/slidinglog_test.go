package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// stamped is one allowed sliding-log take: the time Redis decided it at
// (its Slot, in µs) and its cost.
type stamped struct {
	at   int64
	cost int
}

// mostInAnyWindow is the most units of takes in any interval [t, t+p) of
// their decision times.
func mostInAnyWindow(takes []stamped, p time.Duration) int {
	slices.SortFunc(takes, func(a, b stamped) int { return int(a.at - b.at) })
	most, sum, j := 0, 0, 0
	for i := range takes {
		sum += takes[i].cost
		for takes[j].at <= takes[i].at-p.Microseconds() {
			sum -= takes[j].cost
			j++
		}
		most = max(most, sum)
	}
	return most
}

// TestSlidingLogFourInstancesNeverExceedRateInAnyTrailingWindow: four
// Stores on four clients, as four processes would be, share one key of one
// Redis under concurrent load with costs of 1 and 2, coalescing and the
// denied cache on. On a shared test clock that moves forward in uneven
// steps and now and then steps back, and on the server's own clock, the
// units admitted in any trailing period, by the times Redis decided at,
// never exceed the rate.
func TestSlidingLogFourInstancesNeverExceedRateInAnyTrailingWindow(t *testing.T) {
	requireShared(t)
	const instances, workers, rate = 4, 4, 10
	for _, serverTime := range []bool{false, true} {
		t.Run(fmt.Sprintf("server-time=%v", serverTime), func(t *testing.T) {
			period := 200 * time.Millisecond
			if serverTime {
				period = 20 * time.Millisecond // several periods go by under load
			}
			clock := ratelimittest.NewClock(ratelimittest.Epoch())
			prefix := uniquePrefix(t)
			stores := make([]*Store, instances)
			for i := range stores {
				client := redis.NewClient(&redis.Options{Addr: sharedServer.Addr})
				t.Cleanup(func() { client.Close() })
				opts := []Option{WithPrefix(prefix), WithCoalescing(8, 0)}
				if !serverTime {
					opts = append(opts, WithClock(clock))
				}
				stores[i] = newStore(client, opts...)
			}
			req := withAlg(gcraReq("hot", ratelimit.Limit{Rate: rate, Period: period}, 1), ratelimit.SlidingLog)
			rng := rand.New(rand.NewPCG(1, 2))
			var mu sync.Mutex
			var takes []stamped
			// On the server's clock the admitted count depends on how many
			// periods go by, so the run goes on until it has admitted
			// enough to test something (a quiet machine is fast), within
			// a bound that a working store reaches long before.
			for round := 0; round < 60 || serverTime && len(takes) < 60 && round < 20000; round++ {
				if !serverTime {
					step := time.Duration(rng.IntN(120)) * time.Millisecond
					if round%5 == 4 {
						step = -time.Duration(rng.IntN(100)) * time.Millisecond // stepped back
					}
					clock.Advance(step)
				}
				var wg sync.WaitGroup
				for _, s := range stores {
					for w := range workers {
						wg.Go(func() {
							r := req
							r.Cost = 1 + w%2
							for range 3 {
								res, err := s.Take(context.Background(), r)
								if err != nil {
									t.Error(err)
									return
								}
								if res.Allowed {
									mu.Lock()
									takes = append(takes, stamped{int64(res.Slot), r.Cost})
									mu.Unlock()
								}
							}
						})
					}
				}
				wg.Wait()
			}
			if most := mostInAnyWindow(takes, period); most > rate {
				t.Fatalf("%d units admitted in one trailing %v, limit %d", most, period, rate)
			}
			if len(takes) < 30 {
				t.Fatalf("only %d takes admitted: the run tests nothing", len(takes))
			}
		})
	}
}

// TestSlidingLogCheckIsOneRoundTrip: a sliding-log check, allowed or
// denied, is one script call.
func TestSlidingLogCheckIsOneRoundTrip(t *testing.T) {
	requireShared(t)
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	s := newStore(standaloneClient(t), WithPrefix(uniquePrefix(t)), WithClock(clock), WithoutDeniedCache())
	req := withAlg(gcraReq("k", ratelimit.PerMinute(2), 1), ratelimit.SlidingLog)
	mustTake(t, s, withAlg(gcraReq("warm", ratelimit.PerMinute(2), 1), ratelimit.SlidingLog)) // loads the script
	for i, allowed := range []bool{true, true, false} {
		before := s.Stats().RoundTrips
		if res := mustTake(t, s, req); res.Allowed != allowed {
			t.Fatalf("check %d: %+v, want allowed %v", i+1, res, allowed)
		}
		if n := s.Stats().RoundTrips - before; n != 1 {
			t.Fatalf("check %d took %d round trips, want 1", i+1, n)
		}
	}
}

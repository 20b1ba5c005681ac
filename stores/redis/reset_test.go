package redisstore

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

func TestResetDeletesTheKeyOfOneRuleAndAlgorithm(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			client := b.client(t)
			clock := ratelimittest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			s := newStore(client, WithClock(clock), WithPrefix(uniquePrefix(t)))
			for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.Concurrency, ratelimit.SlidingLog} {
				l := ratelimit.Limit{Rate: 2, Period: time.Hour}
				for _, rule := range []string{"a", "b"} {
					for range 2 {
						if res, err := s.Take(ctx, stores.Request{Rule: rule, Key: "k}%", Limit: l, Algorithm: alg, Cost: 1}); err != nil || !res.Allowed {
							t.Fatalf("%v take: %+v %v", alg, res, err)
						}
					}
				}
				// A denial, so that the denied cache holds the key.
				if res, _ := s.Take(ctx, stores.Request{Rule: "a", Key: "k}%", Limit: l, Algorithm: alg, Cost: 1}); res.Allowed {
					t.Fatalf("%v: third take allowed", alg)
				}
				if err := s.Reset(ctx, "a", "k}%", alg); err != nil {
					t.Fatal(err)
				}
				if res, err := s.Take(ctx, stores.Request{Rule: "a", Key: "k}%", Limit: l, Algorithm: alg, Cost: 1}); err != nil || !res.Allowed || res.Remaining != 1 {
					t.Fatalf("%v after reset: %+v %v", alg, res, err)
				}
				if res, err := s.Take(ctx, stores.Request{Rule: "b", Key: "k}%", Limit: l, Algorithm: alg}); err != nil || res.Remaining != 0 {
					t.Fatalf("%v: reset of rule a touched rule b: %+v %v", alg, res, err)
				}
				if err := s.Reset(ctx, "never-used", "k", alg); err != nil {
					t.Fatalf("reset of a key with no state: %v", err)
				}
			}
		})
	}
}

func TestResetThroughTheLimiterAndItsErrors(t *testing.T) {
	ctx := context.Background()
	s := newStore(standaloneClient(t), WithPrefix(uniquePrefix(t)))
	long := strings.Repeat("x", 400)
	l := ratelimit.NewLimiter(ratelimit.PerHour(1), ratelimit.ByHeader("X-Key"), ratelimit.WithName("api"), ratelimit.WithStore(s))
	h := l.Handler(nil2xx{})
	req := func() int {
		return ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1", "X-Key", long)).Code
	}
	if req() != 200 || req() != 429 {
		t.Fatal("limit of 1 not enforced")
	}
	if err := l.Reset(ctx, "api", long); err != nil {
		t.Fatal(err)
	}
	if c := req(); c != 200 {
		t.Fatalf("after Limiter.Reset: %d", c)
	}
	if err := s.Reset(ctx, "a", "k", stores.Algorithm(9)); !errors.Is(err, stores.ErrInvalidRequest) {
		t.Fatalf("unknown algorithm: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Reset(cctx, "a", "k", stores.GCRA); err == nil {
		t.Fatal("reset with a cancelled context succeeded")
	}
}

type nil2xx struct{}

func (nil2xx) ServeHTTP(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }

// TestHotSplitResetKeepsOneKeysLimit: Reset of a split key gives it its
// full capacity once, not twice: a Store that follows the split (its parts)
// and a Store below the threshold (the main key) together admit at one
// instant no more than one full bucket.
func TestHotSplitResetKeepsOneKeysLimit(t *testing.T) {
	limit := ratelimit.PerSecond(300)
	hot := stores.Request{Rule: "api", Key: "198.51.100.96", Limit: limit, Cost: 1}
	peers, clock := splitByTakes(t, hot, 40)
	ctx := context.Background()
	clock.Advance(1100 * time.Millisecond) // the parts refill to full
	if res, err := peers[0].Take(ctx, hot); err != nil || !res.Allowed {
		t.Fatalf("a check of the split key: %+v, %v", res, err)
	}
	if err := peers[1].Reset(ctx, hot.Rule, hot.Key, stores.GCRA); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for _, c := range []struct{ s, n int }{{1, 39}, {0, 400}} { // 39: below peers[1]'s threshold
		for range c.n {
			res, err := peers[c.s].Take(ctx, hot)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				admitted++
			}
		}
	}
	if admitted > limit.Capacity() {
		t.Errorf("%d admitted at one instant after a Reset: want at most the capacity %d", admitted, limit.Capacity())
	}
}

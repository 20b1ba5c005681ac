package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func TestResetForgetsOneKeyOfOneRuleAndAlgorithm(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	l := ratelimit.Limit{Rate: 2, Period: time.Hour}
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.Concurrency, ratelimit.SlidingLog} {
		take := func(rule, key string, cost int) ratelimit.Result {
			res, err := s.Take(ctx, ratelimit.Request{Rule: rule, Key: key, Limit: l, Algorithm: alg, Cost: cost})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		for _, rk := range [][2]string{{"a", "k"}, {"b", "k"}, {"a", "j"}} {
			take(rk[0], rk[1], 2)
		}
		if err := s.Reset(ctx, "a", "k", alg); err != nil {
			t.Fatal(err)
		}
		if res := take("a", "k", 0); res.Remaining != 2 {
			t.Errorf("%v: %d remaining after reset, want 2", alg, res.Remaining)
		}
		if take("b", "k", 0).Remaining != 0 || take("a", "j", 0).Remaining != 0 {
			t.Errorf("%v: reset touched another rule or key", alg)
		}
		if err := s.Reset(ctx, "a", "k", ratelimit.Algorithm(9)); err == nil {
			t.Errorf("unknown algorithm accepted")
		}
	}
}

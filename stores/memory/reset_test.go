package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func TestResetForgetsOneKeyOfOneRuleAndAlgorithm(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	l := stores.Limit{Rate: 2, Period: time.Hour}
	for _, alg := range []stores.Algorithm{stores.GCRA, stores.SlidingWindow, stores.FixedWindow, stores.Concurrency, stores.SlidingLog} {
		take := func(rule, key string, cost int) stores.Result {
			res, err := s.Take(ctx, stores.Request{Rule: rule, Key: key, Limit: l, Algorithm: alg, Cost: cost})
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
		if err := s.Reset(ctx, "a", "k", stores.Algorithm(9)); err == nil {
			t.Errorf("unknown algorithm accepted")
		}
	}
}

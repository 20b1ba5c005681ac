package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestRegressionShardedEviction2: even when asked for far more shards than
// the bound warrants, a store up to 80% full never resets a live key.
func TestRegressionShardedEviction2(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, n := range []int{1000, 10000} {
		for _, pct := range []int{10, 20, 30, 50, 80} {
			s := memory.New(memory.WithMaxKeys(n), memory.WithShards(512))
			lim := ratelimit.PerHour(1)
			keys := n * pct / 100
			for i := 0; i < keys; i++ {
				s.TakeAt(now, ratelimit.Request{Key: fmt.Sprint("k", i), Limit: lim, Cost: 1})
			}
			reset := 0
			for i := 0; i < keys; i++ {
				if res, _ := s.TakeAt(now, ratelimit.Request{Key: fmt.Sprint("k", i), Limit: lim, Cost: 0}); res.Allowed {
					reset++
				}
			}
			t.Logf("WithMaxKeys(%d) at %d%% (%d live keys, each limited for an hour): %d evicted and reset", n, pct, keys, reset)
			if reset > 0 {
				t.Errorf("WithMaxKeys(%d) at %d%% full reset %d live keys", n, pct, reset)
			}
		}
	}
}

package memory_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestShardedStoreBelowBoundResetsNoLiveKey: a store bounded by
// WithMaxKeys(n) and split into shards (the default count, or far more
// than the bound warrants) never evicts, and so resets, a live limited key
// while it holds up to 80% of n keys: a shard's share of the bound is not
// a hard cap of its own.
func TestShardedStoreBelowBoundResetsNoLiveKey(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := ratelimit.PerHour(1)
	for _, n := range []int{1000, 10000} {
		for _, shards := range []int{0, 512} {
			for _, pct := range []int{10, 20, 30, 50, 80} {
				opts := []memory.Option{memory.WithMaxKeys(n)}
				if shards > 0 {
					opts = append(opts, memory.WithShards(shards))
				}
				s := memory.New(opts...)
				keys := n * pct / 100
				for i := range keys {
					s.TakeAt(now, ratelimit.Request{Key: "k" + strconv.Itoa(i), Limit: lim, Cost: 1})
				}
				reset := 0
				for i := range keys {
					if res, _ := s.TakeAt(now, ratelimit.Request{Key: "k" + strconv.Itoa(i), Limit: lim, Cost: 0}); res.Allowed {
						reset++
					}
				}
				if reset > 0 {
					t.Errorf("WithMaxKeys(%d), %s, %d%% full: %d of %d live keys were evicted and reset",
						n, shardsName(shards), pct, reset, keys)
				}
			}
		}
	}
}

func shardsName(n int) string {
	if n == 0 {
		return "default shards"
	}
	return fmt.Sprint(n, " shards")
}

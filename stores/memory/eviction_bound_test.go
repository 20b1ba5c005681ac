package memory_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
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
					s.TakeAt(now, stores.Request{Key: "k" + strconv.Itoa(i), Limit: lim, Cost: 1})
				}
				reset := 0
				for i := range keys {
					if res, _ := s.TakeAt(now, stores.Request{Key: "k" + strconv.Itoa(i), Limit: lim, Cost: 0}); res.Allowed {
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

// TestEveryTableStaysWithinMaxKeysUnderAFloodOfFreshKeys: a flood of
// fresh keys, each limited for an hour, so that nothing expires and every
// new key must evict one, never makes a table hold more than WithMaxKeys
// keys: not GCRA's, not the fixed and sliding windows', not Concurrency's.
// The window and Concurrency tables grew past the bound (1,100 to 1,250
// keys at 1,024) whenever eviction's sample of a full shard met only empty
// slots and the new key went in without a victim; and a bound the shards
// do not divide (5,001 over 4) was rounded up per shard.
func TestEveryTableStaysWithinMaxKeysUnderAFloodOfFreshKeys(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	algs := []stores.Algorithm{stores.GCRA, stores.FixedWindow, stores.SlidingWindow, stores.Concurrency}
	for _, c := range []struct{ bound, flood int }{{1024, 40 * 1024}, {5001, 12 * 5001}} {
		bound := c.bound
		for _, alg := range algs {
			s := memory.New(memory.WithMaxKeys(bound))
			req := stores.Request{Limit: ratelimit.PerHour(5), Algorithm: alg, Cost: 1}
			most := 0
			for i := range c.flood {
				req.Key = "k" + strconv.Itoa(i)
				if res, err := s.TakeAt(now, req); err != nil || !res.Allowed {
					t.Fatalf("%v: fresh key %s: %+v %v", alg, req.Key, res, err)
				}
				if i%64 == 0 || i >= c.flood-64 {
					most = max(most, s.Len())
				}
			}
			if most > bound {
				t.Errorf("WithMaxKeys(%d), %v: the table held %d keys", bound, alg, most)
			}
		}
	}
}

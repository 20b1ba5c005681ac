package memory_test

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestSlidingLogKeyCostsNoMoreThanItIsCountedFor: a sliding-log key counts
// against WithMaxKeys for the bytes its log takes, 64 and 8 a timestamp as
// the allocator rounds them, and 64 for its table slot, in units of 32
// bytes, what a window key costs (see docs/sliding-log.md). Measured on the
// heap with full logs, a key never costs more than it is counted for, nor
// less than half of it, from a log of 1 event to the largest, 10,000, and
// past 4,096, where the allocator rounds to whole pages of 8 KiB.
func TestSlidingLogKeyCostsNoMoreThanItIsCountedFor(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to 80 MB")
	}
	for _, c := range []struct{ rate, keys int }{{1, 20_000}, {10, 20_000}, {100, 5_000}, {1_000, 1_000}, {4_097, 200}, {5_000, 200}, {10_000, 100}} {
		logBytes := 64 + 8*cap(slices.Grow([]int64(nil), c.rate)) // the header, and the ring as the allocator rounds it
		counted := float64(32 * ((logBytes + 64 + 31) / 32))
		keys := make([]string, c.keys)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i)
		}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		s := memory.New(memory.WithShards(1)) // one shard: keys never crowd one and evict
		req := stores.Request{Limit: ratelimit.PerHour(c.rate), Algorithm: ratelimit.SlidingLog, Cost: c.rate}
		used := heapGrowth(func() { // what the keys add to an empty store
			for _, k := range keys {
				req.Key = k
				if res, err := s.TakeAt(now, req); err != nil || !res.Allowed {
					t.Fatalf("rate %d key %s: %+v, %v", c.rate, k, res, err)
				}
			}
		})
		runtime.KeepAlive(keys) // made before: not counted, so kept until after
		if s.Len() != c.keys {
			t.Fatalf("rate %d: %d keys tracked of %d: the test means to measure without eviction", c.rate, s.Len(), c.keys)
		}
		perKey := float64(used) / float64(c.keys)
		t.Logf("rate %d: %.0f bytes per full sliding-log key, counted as %.0f", c.rate, perKey, counted)
		if perKey > counted || perKey < counted/2 {
			t.Errorf("rate %d: a full log costs %.0f bytes, counted as %.0f", c.rate, perKey, counted)
		}
	}
}

// TestFullStoreOfSlidingLogsFitsItsBound: a store bounded to B keys, fed
// full sliding logs until it evicts, holds no more than B window keys' worth
// of memory (32 bytes a key), whatever the logs' Rate: past 4,096 events a
// ring is rounded up to whole pages of 8 KiB, which the weight counts.
func TestFullStoreOfSlidingLogsFitsItsBound(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to 10 MB")
	}
	const bound = 64 << 10 // keys: 2 MiB at 32 bytes a key
	for _, rate := range []int{1, 100, 4_097, 10_000} {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		s := memory.New(memory.WithShards(1), memory.WithMaxKeys(bound))
		req := stores.Request{Limit: ratelimit.PerHour(rate), Algorithm: ratelimit.SlidingLog, Cost: rate}
		used := heapGrowth(func() {
			held, still := 0, 0
			for i := 0; still < 16; i++ { // until sixteen new keys in a row held no more
				req.Key = "k" + strconv.Itoa(i)
				if res, err := s.TakeAt(now, req); err != nil || !res.Allowed {
					t.Fatalf("rate %d key %s: %+v, %v", rate, req.Key, res, err)
				}
				if n := s.Len(); n > held {
					held, still = n, 0
				} else {
					still++
				}
			}
		})
		t.Logf("rate %d: %d keys held, %d bytes, bound %d", rate, s.Len(), used, bound*32)
		if used > bound*32 {
			t.Errorf("rate %d: a full store holds %d keys in %d bytes, over its bound's %d", rate, s.Len(), used, bound*32)
		}
	}
}

// TestFullStoreOfSlidingLogsFitsItsBoundOverManyShards: the bound holds
// for a store of many shards too, whose share of the bound each is smaller
// than a log of 10,000 events (2,564 keys): 64 shards of 1,024 keys here,
// as a store with the default bound has on a machine of 64 cores. Each
// shard kept such a log alone, and the store held 2.5 times its bound.
func TestFullStoreOfSlidingLogsFitsItsBoundOverManyShards(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to 40 MB")
	}
	const shards, bound = 64, 64 << 10 // keys: 2 MiB at 32 bytes a key
	for _, rate := range []int{4_000, 10_000} {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var s *memory.Store
		used := heapGrowth(func() {
			s = memory.New(memory.WithShards(shards), memory.WithMaxKeys(bound))
			req := stores.Request{Limit: ratelimit.PerHour(rate), Algorithm: ratelimit.SlidingLog, Cost: rate}
			for i := range 8 * shards { // enough keys to reach every shard
				req.Key = "k" + strconv.Itoa(i)
				if res, err := s.TakeAt(now, req); err != nil || !res.Allowed {
					t.Fatalf("rate %d key %s: %+v, %v", rate, req.Key, res, err)
				}
			}
		})
		t.Logf("rate %d: %d keys held, %d bytes, bound %d", rate, s.Len(), used, bound*32)
		if used > bound*32 {
			t.Errorf("rate %d over %d shards: a full store holds %d keys in %d bytes, over its bound's %d", rate, shards, s.Len(), used, bound*32)
		}
	}
}

// TestFullStoreOfSlidingLogsFitsItsBoundAfterLighterLogs: a store that
// held many light logs and then heavy ones holds no more than its bound:
// the table that the light logs' keys made large is not kept at that
// size for a few heavy keys (13,107 logs of 1 event, then 25 of 10,000
// took 2.40 MB for a 2.10 MB bound while it was).
func TestFullStoreOfSlidingLogsFitsItsBoundAfterLighterLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to 10 MB")
	}
	const bound = 64 << 10 // keys: 2 MiB at 32 bytes a key
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.New(memory.WithShards(1), memory.WithMaxKeys(bound))
	used := heapGrowth(func() {
		k := 0
		for _, c := range []struct{ rate, keys int }{{1, bound / 4}, {10_000, 100}} {
			req := stores.Request{Limit: ratelimit.PerHour(c.rate), Algorithm: ratelimit.SlidingLog, Cost: c.rate}
			for range c.keys {
				req.Key = "k" + strconv.Itoa(k)
				k++
				if res, err := s.TakeAt(now, req); err != nil || !res.Allowed {
					t.Fatalf("rate %d key %s: %+v, %v", c.rate, req.Key, res, err)
				}
			}
		}
	})
	t.Logf("%d keys held, %d bytes, bound %d", s.Len(), used, bound*32)
	if used > bound*32 {
		t.Errorf("a full store holds %d keys in %d bytes, over its bound's %d", s.Len(), used, bound*32)
	}
}

// heapGrowth is how much the live heap grows while fill runs, measured
// after a collection on either side: what fill left reachable.
func heapGrowth(fill func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fill()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

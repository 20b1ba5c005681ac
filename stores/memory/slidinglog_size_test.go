package memory_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestSlidingLogKeyCostsNoMoreThanItIsCountedFor: a sliding-log key counts
// against WithMaxKeys as ceil((9*Rate+128)/32) keys (32 bytes being what a
// window key costs; see docs/sliding-log.md). Measured on the heap with
// full logs, a key never costs more than it is counted for, nor less than
// half of it, from a log of 1 event to the largest, 10,000.
func TestSlidingLogKeyCostsNoMoreThanItIsCountedFor(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to 80 MB")
	}
	for _, c := range []struct{ rate, keys int }{{1, 20_000}, {10, 20_000}, {100, 5_000}, {1_000, 1_000}, {10_000, 100}} {
		counted := float64(32 * ((9*c.rate + 128 + 31) / 32))
		keys := make([]string, c.keys)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i)
		}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := memory.New(memory.WithShards(1)) // one shard: keys never crowd one and evict
		req := stores.Request{Limit: ratelimit.PerHour(c.rate), Algorithm: ratelimit.SlidingLog, Cost: c.rate}
		for _, k := range keys {
			req.Key = k
			if res, err := s.TakeAt(now, req); err != nil || !res.Allowed {
				t.Fatalf("rate %d key %s: %+v, %v", c.rate, k, res, err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(s)
		runtime.KeepAlive(keys)
		if s.Len() != c.keys {
			t.Fatalf("rate %d: %d keys tracked of %d: the test means to measure without eviction", c.rate, s.Len(), c.keys)
		}
		perKey := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(c.keys)
		t.Logf("rate %d: %.0f bytes per full sliding-log key, counted as %.0f", c.rate, perKey, counted)
		if perKey > counted || perKey < counted/2 {
			t.Errorf("rate %d: a full log costs %.0f bytes, counted as %.0f", c.rate, perKey, counted)
		}
	}
}

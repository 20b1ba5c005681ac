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

// heapPerKey fills a fresh store (default bound and shards) with n keys of
// alg and returns the live heap it grew by per tracked key, and how many
// keys it tracks (fewer than n at the bound: it evicts).
func heapPerKey(n int, alg stores.Algorithm) (float64, int) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := memory.New()
	req := stores.Request{Limit: ratelimit.PerMinute(100), Algorithm: alg, Cost: 1}
	for _, k := range keys {
		req.Key = k
		if _, err := s.TakeAt(now, req); err != nil {
			panic(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	runtime.KeepAlive(keys)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(s.Len()), s.Len() // memory freed elsewhere must not wrap around
}

// TestMemoryPerKey holds the memory store to its budget of at most 32
// bytes per tracked GCRA key and 48 per window key at 200,000 keys (keys
// are kept as 64-bit hashes, so the key's own length does not count). The
// full default bound is measured in size_full_test.go.
func TestMemoryPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 200,000 keys")
	}
	perKey, _ := heapPerKey(200_000, stores.GCRA)
	t.Logf("GCRA: %.1f bytes per tracked key at 200,000 keys", perKey)
	if perKey > 32 {
		t.Errorf("GCRA keys cost %.1f bytes each, want at most 32", perKey)
	}
	perKey, _ = heapPerKey(200_000, stores.SlidingWindow)
	t.Logf("window algorithms: %.1f bytes per tracked key at 200,000 keys", perKey)
	if perKey > 48 { // docs/exact-limits.md reports 39
		t.Errorf("window keys cost %.1f bytes each, want at most 48", perKey)
	}
}

package memory_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestConcurrencyKeyHoldsMemoryForWhatIsInFlight: a Concurrency key keeps a
// queue of its acquisitions in flight, about 64 bytes and 24 an acquisition
// (see the package doc). A key that had 200 in flight and gave all but one
// back holds memory for one, not for its 200: an attacker who
// walks a burst of Rate acquisitions through many keys, then keeps each key
// alive with one, does not leave every key holding its peak.
func TestConcurrencyKeyHoldsMemoryForWhatIsInFlight(t *testing.T) {
	const keys, peak = 2000, 200
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.New(memory.WithShards(1))
	used := heapGrowth(func() {
		req := stores.Request{Limit: ratelimit.Limit{Rate: peak, Period: time.Hour}, Algorithm: stores.Concurrency, Cost: 1}
		slots := make([]uint64, peak)
		for k := range keys {
			req.Key = "k" + strconv.Itoa(k)
			for i := range slots {
				res, err := s.TakeAt(now, req)
				if err != nil || !res.Allowed {
					t.Fatalf("key %s, acquisition %d: %+v, %v", req.Key, i, res, err)
				}
				slots[i] = res.Slot
			}
			for _, slot := range slots[1:] { // all but the first go back
				r := req
				r.Slot = slot
				if err := s.ReturnAt(now, r); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	perKey := float64(used) / keys
	t.Logf("%d keys, one acquisition each in flight after %d: %.0f bytes a key", s.Len(), peak, perKey)
	if s.Len() != keys {
		t.Fatalf("%d keys tracked, want %d", s.Len(), keys)
	}
	if perKey > 600 { // 64, 24 an acquisition, room for 16 more (384), its table slot
		t.Errorf("a key with one acquisition in flight holds %.0f bytes, want at most 600", perKey)
	}
}

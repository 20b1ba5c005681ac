package memory_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestEvictionKeepsLimitedKeys fills a small store with short-lived keys,
// far beyond its bound, while one key stays limited for an hour: expired
// keys must make room, the limited key must never be reset, and the store
// must stay within its bound.
func TestEvictionKeepsLimitedKeys(t *testing.T) {
	const maxKeys = 256
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.New(memory.WithMaxKeys(maxKeys), memory.WithShards(1))
	victim := stores.Request{Key: "victim", Limit: ratelimit.PerHour(1), Cost: 1}
	if res, _ := s.TakeAt(now, victim); !res.Allowed {
		t.Fatal("first request of the victim denied")
	}
	// Live keys that fill half the store for the whole test.
	for i := 0; i < maxKeys/2; i++ {
		s.TakeAt(now, stores.Request{Key: "live" + strconv.Itoa(i), Limit: ratelimit.PerHour(10), Cost: 1})
	}
	// 20,000 keys that are full again 10ms after their one request.
	churn := stores.Request{Limit: ratelimit.PerSecond(100), Cost: 1}
	for i := 0; i < 20_000; i++ {
		if i%50 == 0 {
			now = now.Add(20 * time.Millisecond)
		}
		churn.Key = "churn" + strconv.Itoa(i)
		if res, _ := s.TakeAt(now, churn); !res.Allowed {
			t.Fatalf("fresh key %s denied", churn.Key)
		}
		if n := s.Len(); n > maxKeys {
			t.Fatalf("store holds %d keys, bound is %d", n, maxKeys)
		}
	}
	res, _ := s.TakeAt(now, victim)
	if res.Allowed {
		t.Fatal("the limited key was evicted and reset while expired keys could make room")
	}
	for i := 0; i < maxKeys/2; i++ {
		live := stores.Request{Key: "live" + strconv.Itoa(i), Limit: ratelimit.PerHour(10)}
		if res, _ := s.TakeAt(now, live); res.Remaining != 9 {
			t.Fatalf("live key %d lost its state: remaining %d, want 9", i, res.Remaining)
		}
	}
}

// TestEvictionWhenFullOfLiveKeys checks the last resort: with no expired key
// left, a new key still gets in, the bound holds, and the evicted key is one
// that would have been full again soonest (never the long-limited one).
func TestEvictionWhenFullOfLiveKeys(t *testing.T) {
	const maxKeys = 64
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.New(memory.WithMaxKeys(maxKeys), memory.WithShards(1))
	long := stores.Request{Key: "long", Limit: ratelimit.PerDay(1), Cost: 1}
	s.TakeAt(now, long)
	for i := 0; i < 10*maxKeys; i++ {
		s.TakeAt(now, stores.Request{Key: "k" + strconv.Itoa(i), Limit: ratelimit.PerMinute(1), Cost: 1})
		if n := s.Len(); n > maxKeys {
			t.Fatalf("store holds %d keys, bound is %d", n, maxKeys)
		}
	}
	if res, _ := s.TakeAt(now, long); res.Allowed {
		t.Fatal("the key limited for a day was evicted before keys limited for a minute")
	}
}

// TestFullStoreOfLiveKeysStillAdmitsNewKeys: a flood of distinct keys, each
// limited for a day, fills the store ten times over; every new key's first
// request is still admitted (a full table is never a denial of everyone
// new), the store stays within its bound, and every key is limited
// after its first request while it is in the store.
func TestFullStoreOfLiveKeysStillAdmitsNewKeys(t *testing.T) {
	const maxKeys = 64
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.New(memory.WithMaxKeys(maxKeys), memory.WithShards(1))
	for i := 0; i < 10*maxKeys; i++ {
		req := stores.Request{Key: "flood" + strconv.Itoa(i), Limit: ratelimit.PerDay(1), Cost: 1}
		if res, err := s.TakeAt(now, req); err != nil || !res.Allowed {
			t.Fatalf("key %d, new to a full store: %+v, %v; want admitted", i, res, err)
		}
		if res, _ := s.TakeAt(now, req); res.Allowed {
			t.Fatalf("key %d admitted twice in a day", i)
		}
		if n := s.Len(); n > maxKeys {
			t.Fatalf("store holds %d keys, bound is %d", n, maxKeys)
		}
	}
}

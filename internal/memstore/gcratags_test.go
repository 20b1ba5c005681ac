package memstore

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// liveSlots counts the slots of shard sh that hold a state of r's key,
// under any tag.
func liveSlots(s *Store, r *Request) int {
	h := s.hash(r)
	sl := s.gcra[s.index(h)].slab.Load()
	n := 0
	for i := range sl.keys {
		if k := sl.keys[i].Load(); k != 0 && (k^h)&^tagMask == 0 && sl.tats[i].Load() != dead {
			n++
		}
	}
	return n
}

// TestGCRALimitChangeRacingChecksKeepOneStatePerKey: checks of one key
// under two limits from many goroutines at one instant (the state moving
// to the shorter interval while lock-free checks under both run) keep one
// state for the key, and admit no more than the higher limit gives: 20,
// whatever the order (5 under PerMinute(5) then 15 more once raised, or
// fewer when PerMinute(5) takes, at 12s each, from a debt counted in 3s
// units).
func TestGCRALimitChangeRacingChecksKeepOneStatePerKey(t *testing.T) {
	low := Limit{Rate: 5, Period: int64(time.Minute), Capacity: 5}
	high := Limit{Rate: 20, Period: int64(time.Minute), Capacity: 20}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for round := range 200 {
		s := New(Config{MaxKeys: 1024, Shards: 1})
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				l := low
				if (g+round)%2 == 0 {
					l = high
				}
				r := Request{Key: "k", Alg: GCRA, Limit: l, Cost: 1}
				for range 30 {
					if s.Take(&r, now).Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		r := Request{Key: "k", Alg: GCRA, Limit: high}
		if n := liveSlots(s, &r); n != 1 || s.Len() != 1 {
			t.Fatalf("round %d: %d slots hold the key's state, %d keys tracked; want 1 and 1", round, n, s.Len())
		}
		if got := admitted.Load(); got > 20 {
			t.Fatalf("round %d: %d admitted at one instant, want at most 20", round, got)
		}
	}
}

// TestGCRAIntervalsBeyondTheTagsAreReadAsTheyStand: a store names the
// first 254 intervals it sees; keys under any further interval still
// count exactly under their own limit, and a raise from such an interval
// reads the debt as it stands (the behaviour without tags), with no lock
// taken to look the interval up.
func TestGCRAIntervalsBeyondTheTagsAreReadAsTheyStand(t *testing.T) {
	s := New(Config{MaxKeys: 4096})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	limit := func(i int) Limit { // distinct intervals, 5 at once
		return Limit{Rate: 5, Period: int64(time.Minute) + 5*int64(i), Capacity: 5}
	}
	for i := range 600 {
		r := Request{Key: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Alg: GCRA, Limit: limit(i), Cost: 5}
		if res := s.Take(&r, now); !res.Allowed || res.Remaining != 0 {
			t.Fatalf("interval %d: %+v, want all 5 allowed", i, res)
		}
		if res := s.Take(&r, now); res.Allowed {
			t.Fatalf("interval %d: a sixth unit allowed", i)
		}
		r.Limit, r.Cost = Limit{Rate: 20, Period: int64(time.Minute), Capacity: 20}, 0
		res := s.Take(&r, now)
		tagged := i < unknownTag-2 // tags 1..254: limit(0), then 20/min, then one each
		if want := int64(15); tagged && res.Remaining != want {
			t.Fatalf("tagged interval %d raised to 20/min: Remaining %d, want %d", i, res.Remaining, want)
		}
		if !tagged && res.Remaining != 0 {
			t.Fatalf("untagged interval %d raised to 20/min: Remaining %d, want 0 (read as it stands)", i, res.Remaining)
		}
	}
	if !s.tags.full.Load() {
		t.Fatal("600 intervals did not fill the index: lookups of new ones would each take the lock")
	}
}

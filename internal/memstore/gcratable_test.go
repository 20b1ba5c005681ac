package memstore

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGCRAHotKeyRemainingIsAPermutation: checks of one key from many
// goroutines at one instant, under a limit that does not refill within it,
// are each decided on a distinct state: the allowed ones report every
// Remaining from Capacity-1 down to 0 exactly once, and then everything is
// denied. A lost or doubled update (two checks swapping from the same
// state) would repeat a Remaining or admit one too many.
func TestGCRAHotKeyRemainingIsAPermutation(t *testing.T) {
	const capacity, workers, each = 2000, 8, 400
	s := New(Config{})
	l := Limit{Rate: capacity, Period: int64(time.Hour), Capacity: capacity}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	seen := make([]atomic.Int32, capacity)
	var denied atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			r := Request{Key: "hot", Alg: GCRA, Limit: l, Cost: 1}
			for range each {
				res := s.Take(&r, now)
				if !res.Allowed {
					denied.Add(1)
					continue
				}
				if res.Remaining < 0 || res.Remaining >= capacity {
					t.Errorf("Remaining %d out of range", res.Remaining)
					return
				}
				seen[res.Remaining].Add(1)
			}
		})
	}
	wg.Wait()
	for rem := range seen {
		if n := seen[rem].Load(); n != 1 {
			t.Fatalf("Remaining %d reported %d times, want once", rem, n)
		}
	}
	if got := denied.Load(); got != workers*each-capacity {
		t.Fatalf("%d denied, want %d", got, workers*each-capacity)
	}
}

// TestGCRAConcurrentBoundUnderChurn: GCRA keys checked concurrently on a
// fixed clock grid, their stamps out of order across goroutines, while
// other goroutines make the small shard drop expired keys, delete keys and
// rebuild its slab, never admit more than burst + elapsed/interval each.
// Every key shares one limit and the grid is coarse, so keys often hold
// equal times: a check whose swap landed on another key's slot (the ABA
// problem of a reused slot) would leave its own key's admission uncounted
// and let it exceed the bound.
func TestGCRAConcurrentBoundUnderChurn(t *testing.T) {
	const tracked, workers, rounds = 6, 4, 3000
	const step = int64(time.Millisecond)
	s := New(Config{MaxKeys: 64, Shards: 1})
	l := Limit{Rate: 10, Period: int64(time.Second), Capacity: 3} // interval 100ms
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var grid atomic.Int64 // steps since t0
	var admitted [tracked]atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range rounds {
				k := rng.IntN(tracked)
				r := Request{Key: fmt.Sprint("tracked", k), Alg: GCRA, Limit: l, Cost: 1}
				now := t0 + grid.Load()*step
				if i%7 == 0 {
					now -= step * int64(rng.IntN(50)) // a caller whose clock lags
				}
				if s.Take(&r, now).Allowed {
					admitted[k].Add(1)
				}
				if i%3 == 0 {
					grid.Add(1)
				}
			}
		})
	}
	churn := func(seed uint64, del bool) {
		rng := rand.New(rand.NewPCG(seed, 2))
		short := Limit{Rate: 1000, Period: int64(time.Millisecond), Capacity: 1} // 1µs
		for i := range 4 * rounds {
			r := Request{Key: fmt.Sprint("churn", rng.IntN(40)), Alg: GCRA, Limit: short, Cost: 1}
			if del && i%2 == 0 {
				s.Delete(&r)
				continue
			}
			s.Take(&r, t0+grid.Load()*step)
		}
	}
	wg.Go(func() { churn(7, false) })
	wg.Go(func() { churn(8, true) })
	wg.Wait()
	elapsed := grid.Load()*step + 50*step // lagging stamps start up to 50 steps early
	bound := l.Capacity + elapsed/l.interval()
	for k := range admitted {
		if got := admitted[k].Load(); got > bound {
			t.Errorf("tracked%d: %d admitted over %v, bound %d", k, got, time.Duration(elapsed), bound)
		}
	}
	if n := s.Len(); n > s.perCap {
		t.Errorf("%d keys, bound %d", n, s.perCap)
	}
}

// TestTakeAllAtomicAgainstLockFreeChecks: TakeAll of two GCRA keys races
// single checks of each (which update without the lock) under limits that
// do not refill: every unit of each key is consumed exactly once, by a
// single check or a TakeAll, and a TakeAll takes both keys or neither.
func TestTakeAllAtomicAgainstLockFreeChecks(t *testing.T) {
	const capA, capB = 3000, 2000
	s := New(Config{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	lim := func(c int64) Limit { return Limit{Rate: c, Period: int64(time.Hour), Capacity: c} }
	a := Request{Key: "a", Alg: GCRA, Limit: lim(capA), Cost: 1}
	b := Request{Key: "b", Alg: GCRA, Limit: lim(capB), Cost: 1}
	var singleA, singleB, pairs atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			res := make([]Result, 2)
			for i := range 2000 {
				switch (w + i) % 3 {
				case 0:
					ra, rb := a, b
					if s.TakeAll([]Request{ra, rb}, res, now) == nil && res[0].Allowed && res[1].Allowed {
						pairs.Add(1)
					} else if res[0].Allowed && res[1].Allowed {
						t.Error("TakeAll failed but reported both allowed")
					}
				case 1:
					r := a
					if s.Take(&r, now).Allowed {
						singleA.Add(1)
					}
				default:
					r := b
					if s.Take(&r, now).Allowed {
						singleB.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	peekA, peekB := a, b
	peekA.Cost, peekB.Cost = 0, 0
	remA, remB := s.Take(&peekA, now).Remaining, s.Take(&peekB, now).Remaining
	if used := singleA.Load() + pairs.Load(); used+remA != capA {
		t.Errorf("a: %d taken + %d left, want %d", used, remA, capA)
	}
	if used := singleB.Load() + pairs.Load(); used+remB != capB {
		t.Errorf("b: %d taken + %d left, want %d", used, remB, capB)
	}
}

// TestAbandonedSlabIsDead: a rebuild marks every slot of the old slab dead
// as it copies it, so a check still holding the old slab can only go to
// the lock, and the new slab holds every live key with its state.
func TestAbandonedSlabIsDead(t *testing.T) {
	s := New(Config{MaxKeys: 1024, Shards: 1})
	l := Limit{Rate: 1, Period: int64(time.Hour), Capacity: 1}
	sh := &s.gcra[0]
	var old *slab
	for i := 0; ; i++ {
		r := Request{Key: fmt.Sprint("k", i), Alg: GCRA, Limit: l, Cost: 1}
		s.Take(&r, int64(i))
		if sl := sh.slab.Load(); old != nil && sl != old {
			break // the insertion of k<i> grew the slab
		}
		old = sh.slab.Load()
	}
	for i := range old.tats {
		if old.keys[i].Load() != 0 && old.tats[i].Load() != dead {
			t.Fatalf("slot %d of the abandoned slab is not dead", i)
		}
	}
	for i := 0; i < sh.live; i++ {
		r := Request{Key: fmt.Sprint("k", i), Alg: GCRA, Limit: l, Cost: 0}
		if res := s.Take(&r, int64(i)); res.Allowed || res.ResetAfter != int64(time.Hour) {
			t.Fatalf("k%d after the rebuild: %+v, want still limited for an hour", i, res)
		}
	}
}

// TestGCRADeadSlotsAreReclaimed: a full shard that keeps evicting and
// dropping keys marks their slots dead and rebuilds its slab in place, so
// the slab never grows past its last size and still finds every live key.
func TestGCRADeadSlotsAreReclaimed(t *testing.T) {
	s := New(Config{MaxKeys: 256, Shards: 1})
	sh := &s.gcra[0]
	hour := Limit{Rate: 1, Period: int64(time.Hour), Capacity: 1}
	const keys = 10_000
	for i := range keys {
		r := Request{Key: "k" + strconv.Itoa(i), Alg: GCRA, Limit: hour, Cost: 1}
		if !s.Take(&r, int64(i)).Allowed {
			t.Fatalf("new key k%d denied", i)
		}
		if i%5 == 0 {
			s.Delete(&Request{Key: "k" + strconv.Itoa(i-1), Alg: GCRA})
		}
		if n := len(sh.slab.Load().keys); n > gcraSlots(s.perCap) {
			t.Fatalf("slab of %d slots, last size %d", n, gcraSlots(s.perCap))
		}
		if sh.live > s.perCap {
			t.Fatalf("%d live keys, bound %d", sh.live, s.perCap)
		}
	}
	// The newest key was never evicted (the soonest-expiring are).
	r := Request{Key: "k" + strconv.Itoa(keys-1), Alg: GCRA, Limit: hour}
	if s.Take(&r, keys).Allowed {
		t.Fatal("the newest key lost its state")
	}
	used := 0
	sl := sh.slab.Load()
	for i := range sl.keys {
		if sl.keys[i].Load() != 0 {
			used++
		}
	}
	if used != sh.used || sh.live > sh.used {
		t.Fatalf("%d slots hold a key, counted %d (%d live)", used, sh.used, sh.live)
	}
}

// TestDroppedSlotIsNotReusedUnderAStalledCheck: a check that read a key's
// slot and state and then stalled while the key was dropped and another
// key took the same state (same limit, same instant) must not be able to
// swap its decision into the other key's state. The other key is picked so
// that its probe sequence starts at the dropped key's slot.
func TestDroppedSlotIsNotReusedUnderAStalledCheck(t *testing.T) {
	s := New(Config{MaxKeys: 1024, Shards: 1})
	sh := &s.gcra[0]
	l := Limit{Rate: 1, Period: 1000, Capacity: 1}
	for k := range 100 { // a slab that the next few keys do not grow
		s.Take(&Request{Key: fmt.Sprint("filler", k), Alg: GCRA, Limit: l, Cost: 1}, 0)
	}
	a := Request{Key: "a", Alg: GCRA, Limit: l, Cost: 1}
	s.Take(&a, 0)
	sl := sh.slab.Load()
	i := sl.find(s.gcraKey(&a, s.hash(&a)))
	old := sl.tats[i].Load() // the stalled check's read

	s.Delete(&a)
	b := Request{Alg: GCRA, Limit: l, Cost: 1}
	for k := 0; ; k++ {
		b.Key = fmt.Sprint("b", k)
		if sl.home(s.gcraKey(&b, s.hash(&b))) == i {
			break
		}
	}
	if !s.Take(&b, 0).Allowed || sh.slab.Load() != sl {
		t.Fatal("setup: b not inserted into the same slab")
	}
	if got, _ := sh.get(s.gcraKey(&b, s.hash(&b))); got != old {
		t.Fatalf("setup: b's state %d, want a's old state %d", got, old)
	}
	if sl.tats[i].CompareAndSwap(old, old+l.interval()) {
		t.Fatalf("the stalled check of a swapped its decision into slot %d, now key %x (b is %x)",
			i, sl.keys[i].Load(), s.gcraKey(&b, s.hash(&b)))
	}
	if res := s.Take(&b, 0); res.Allowed {
		t.Fatalf("b admitted twice at one instant under 1 per period: %+v", res)
	}
}

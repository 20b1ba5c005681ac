package memstore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestHotWindowKeyLosesNoUpdate: checks of one hot window key from several
// goroutines, whose counts are raised without the shard lock, while new
// keys inserted into the same shard retire the hot state again and again,
// count every unit exactly once: as many admitted as the limit, and
// the key's count at the end is what was admitted.
func TestHotWindowKeyLosesNoUpdate(t *testing.T) {
	const workers, each = 4, 3000
	for alg, name := range map[Alg]string{FixedWindow: "fixed", SlidingWindow: "sliding"} {
		for _, rate := range []int64{workers * each / 2, workers * each * 2} { // denies, and not
			t.Run(fmt.Sprintf("%s/rate=%d", name, rate), func(t *testing.T) {
				s := New(Config{MaxKeys: 1024}) // one shard: every key shares its lock
				l := Limit{Rate: rate, Period: int64(time.Hour), Capacity: rate}
				now := int64(1_700_000_000) * int64(time.Second) // every check in one window
				hot := s.Prepare(Request{Rule: "r", Alg: alg, Limit: l, Cost: 1})
				var admitted [workers]int64
				var wg sync.WaitGroup
				for g := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range each {
							if hot.Take("hot", now).Allowed {
								admitted[g]++
							}
							if i%16 == g { // a new key's insertion: the hot state is retired
								other := Request{Rule: "r", Key: fmt.Sprint("other", g, "-", i), Alg: alg, Limit: l, Cost: 1}
								s.Take(&other, now)
							}
						}
					}()
				}
				wg.Wait()
				total := int64(0)
				for _, n := range admitted {
					total += n
				}
				if want := min(rate, workers*each); total != want {
					t.Fatalf("%d admitted, want %d", total, want)
				}
				peek := Request{Rule: "r", Key: "hot", Alg: alg, Limit: l}
				if got := s.Take(&peek, now).Remaining; got != rate-total {
					t.Fatalf("%d remaining after %d admitted of %d, want %d", got, total, rate, rate-total)
				}
			})
		}
	}
}

// TestHotWindowDecidesAsTheLockedPath: a store whose keys turn hot and back
// decides every check as applyWindow alone does on a plain table: keys
// checked again and again, clocks stepping back, costs above one and zero,
// limits of another period,
// windows' edges, returns and settlements among them, and checks prepared
// (Prepared.Take) as well as not.
func TestHotWindowDecidesAsTheLockedPath(t *testing.T) {
	for _, alg := range []Alg{FixedWindow, SlidingWindow} {
		s := New(Config{MaxKeys: 1024})
		prepared := map[Request]*Prepared{} // by the request without its key
		ref := &shard[window]{t: newTable[window](s.perCap), floor: math.MaxInt64}
		rng := rand.New(rand.NewPCG(3, uint64(alg)))
		l := Limit{Rate: 40, Period: int64(time.Second), Capacity: 40}
		now := int64(1_700_000_000) * int64(time.Second)
		for i := range 50_000 {
			now += rng.Int64N(int64(time.Second)/50) - int64(time.Second)/400
			if rng.IntN(8) == 0 { // on a window's edge, or a nanosecond either side
				now += l.Period - mod(now, l.Period) + rng.Int64N(3) - 1
			}
			r := Request{Rule: "r", Key: fmt.Sprint("k", rng.IntN(3)), Alg: alg, Limit: l, Cost: rng.Int64N(4)}
			if rng.IntN(16) == 0 { // the rule changed, to windows of another period
				r.Limit = Limit{Rate: 30, Period: int64(1500 * time.Millisecond), Capacity: 30}
			}
			h := s.hash(&r)
			switch op := rng.IntN(20); {
			case op == 0: // a return of what the current window holds
				s.Return(&r, now)
				if w, ok := ref.t.get(h); ok {
					next, _ := settleWindow(w, now, &r, -r.Cost)
					set(ref, h, next)
				}
				continue
			case op == 1:
				r.Force = true
			}
			var got Result
			if rule := (Request{Rule: r.Rule, Alg: r.Alg, Limit: r.Limit, Cost: r.Cost}); !r.Force && rng.IntN(2) == 0 {
				if prepared[rule] == nil {
					prepared[rule] = s.Prepare(rule)
				}
				got = prepared[rule].Take(r.Key, now)
			} else {
				got = s.Take(&r, now)
			}
			want := Result{Allowed: true, Remaining: -1, RetryAfter: -1, ResetAfter: -1, Delay: -1, Slot: 1, Next: -1} // every field overwritten
			applyWindow(ref, s.perCap, h, &r, now, &want)
			if got != want {
				t.Fatalf("%v check %d (%+v at %d): got %+v, want %+v", alg, i, r, now, got, want)
			}
		}
	}
}

// TestHotWindowKeyIsSweptLikeAnyOther: a hot key whose window has expired
// is dropped by the scan of a full shard like any other key, and is not
// brought back beside the keys that took its place: the shard never holds
// more than its bound.
func TestHotWindowKeyIsSweptLikeAnyOther(t *testing.T) {
	for alg, name := range map[Alg]string{FixedWindow: "fixed", SlidingWindow: "sliding"} {
		t.Run(name, func(t *testing.T) {
			s := New(Config{MaxKeys: 1024}) // one shard of 1024 keys
			minute := Limit{Rate: 5, Period: int64(time.Minute), Capacity: 5}
			now := int64(1_700_000_000) * int64(time.Second)
			hot := Request{Key: "hot", Alg: alg, Limit: minute, Cost: 1}
			for range 3 { // two locked checks make it hot, the third is counted there
				s.Take(&hot, now)
			}
			hour := Limit{Rate: 5, Period: int64(time.Hour), Capacity: 5}
			for i := 0; s.Len() < s.perCap; i++ {
				f := Request{Key: fmt.Sprint("filler", i), Alg: alg, Limit: hour, Cost: 1}
				s.Take(&f, now)
			}
			later := now + 3*minute.Period // the hot key's state has expired
			other := Request{Key: "other", Alg: alg, Limit: hour, Cost: 1}
			s.Take(&other, later) // the full shard scans itself: the hot key goes
			s.Take(&hot, later)   // and comes back as a new key, making room
			if n := s.Len(); n > s.perCap {
				t.Fatalf("%d keys in a shard of %d", n, s.perCap)
			}
		})
	}
}

package memstore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHotSlotsSkipTheShardLock: once a Concurrency key's acquisitions took
// its shard's lock twice in a row, its slots are taken and released under
// the key's own lock: with the shard's lock held (here by the test itself),
// the key's acquisition and release still complete. Another key's
// acquisition, which takes the shard's lock, ends it.
func TestHotSlotsSkipTheShardLock(t *testing.T) {
	s := New(Config{MaxKeys: 1024}) // one shard
	p := s.Prepare(Request{Rule: "inflight", Alg: Concurrency, Limit: Limit{Rate: 2, Period: int64(time.Minute)}, Cost: 1})
	now := int64(1_700_000_000) * int64(time.Second)
	for range 2 {
		res := p.Take("k", now)
		p.Release("k", res.Slot, now)
	}
	sh := &s.conc[0]
	sh.mu.Lock()
	a, b, c := p.Take("k", now), p.Take("k", now), p.Take("k", now)
	p.Release("k", a.Slot, now)
	d := p.Take("k", now)
	sh.mu.Unlock()
	if !a.Allowed || !b.Allowed || c.Allowed || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("under the key's own lock: got %+v %+v %+v %+v, want 2 of 2 taken, a denial, and the released one again", a, b, c, d)
	}
	if other := p.Take("other", now); !other.Allowed {
		t.Fatalf("another key: %+v", other)
	}
	if p.Take("other", now); sh.hot.Load() == nil || sh.hotKey.Load() != s.hash(&Request{Rule: "inflight", Key: "other", Alg: Concurrency}) {
		t.Fatal("the other key did not become hot in place of the first")
	}
	if res := p.Take("k", now); res.Allowed { // under the shard's lock again: still 2 held
		t.Fatalf("the first key after it stopped being hot: %+v, want denied", res)
	}
	p.Release("k", b.Slot, now)
	p.Release("k", d.Slot, now)
	if res := p.Take("k", now); !res.Allowed || res.Remaining != 1 {
		t.Fatalf("after both releases: %+v, want 1 slot left", res)
	}
}

// TestHotSlotsDecideAsTheLockedPath: a Concurrency key taken and released
// by lone calls (which make it hot) gets the same answers as its twin in a
// store where every acquisition is a TakeAll (which keeps it under the
// shard's lock), through expiries, releases by token and by the soonest
// slots, and a TakeAll among the lone calls.
func TestHotSlotsDecideAsTheLockedPath(t *testing.T) {
	sec := int64(time.Second)
	l := Limit{Rate: 5, Period: 10 * sec}
	a, b := New(Config{MaxKeys: 1024}), New(Config{MaxKeys: 1024})
	now := int64(1_700_000_000) * sec
	type slotOf struct {
		key    string
		tokens [2]uint64 // in a and in b
	}
	var held []slotOf
	hot := 0 // steps that found a key hot in a
	for i := range 5000 {
		now += int64(i%7) * sec / 4
		key := fmt.Sprint("k", i%3/2) // k0 twice, then k1: each becomes hot in turn
		r := Request{Rule: "c", Key: key, Alg: Concurrency, Limit: l, Cost: 1 + int64(i%11/10)}
		switch op := i % 5; {
		case op < 3: // acquire
			var ra Result
			if i%13 == 0 {
				res := make([]Result, 1)
				if err := a.TakeAll([]Request{r}, res, now); err != nil {
					t.Fatal(err)
				}
				ra = res[0]
			} else {
				ra = a.Take(&r, now)
			}
			res := make([]Result, 1)
			if err := b.TakeAll([]Request{r}, res, now); err != nil {
				t.Fatal(err)
			}
			rb := res[0]
			if rb.Slot != 0 {
				held = append(held, slotOf{key, [2]uint64{ra.Slot, rb.Slot}})
			}
			if ra.Slot == 0 != (rb.Slot == 0) {
				t.Fatalf("step %d: slot %d and %d", i, ra.Slot, rb.Slot)
			}
			ra.Slot, rb.Slot = 0, 0
			if ra != rb {
				t.Fatalf("step %d (%s at %d): got %+v, want %+v", i, key, now, ra, rb)
			}
		case op == 3 && len(held) > 0: // release by token, expired or not
			j := i % len(held)
			for k, st := range []*Store{a, b} {
				ret := r
				ret.Key, ret.Slot = held[j].key, held[j].tokens[k]
				st.Return(&ret, now)
			}
			held = append(held[:j], held[j+1:]...)
		default: // release the soonest
			ret := r
			ret.Cost = 1
			a.Return(&ret, now)
			b.Return(&ret, now)
		}
		if a.conc[0].hot.Load() != nil {
			hot++
		}
	}
	if hot < 1000 {
		t.Fatalf("a key was hot in %d steps of 5000", hot)
	}
}

// TestHotSlotsNeverAdmitPastTheLimit: goroutines acquire and release the
// slots of two keys of one shard at once, by lone calls (which make each
// key hot in turn, the heat passing back and forth), and by TakeAll (which
// ends a key's heat): neither key ever has more slots held than its
// limit, and once every slot is back each key has every slot free.
func TestHotSlotsNeverAdmitPastTheLimit(t *testing.T) {
	const rate = 3
	s := New(Config{MaxKeys: 1024})
	l := Limit{Rate: rate, Period: int64(time.Hour)}
	p := s.Prepare(Request{Rule: "c", Alg: Concurrency, Limit: l, Cost: 1})
	now := int64(1_700_000_000) * int64(time.Second)
	keys := []string{"a", "b"}
	var inFlight [2]atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4000 {
				k := (i/3 + w) % 2 // runs of three on one key: each becomes hot in turn
				var res Result
				if w == 3 && i%5 == 0 {
					out := make([]Result, 1)
					if err := s.TakeAll([]Request{{Rule: "c", Key: keys[k], Alg: Concurrency, Limit: l, Cost: 1}}, out, now); err != nil {
						t.Error(err)
						return
					}
					res = out[0]
				} else {
					res = p.Take(keys[k], now)
				}
				if !res.Allowed {
					continue
				}
				if n := inFlight[k].Add(1); n > rate {
					t.Errorf("key %s: %d slots held, limit %d", keys[k], n, rate)
					return
				}
				inFlight[k].Add(-1)
				p.Release(keys[k], res.Slot, now)
			}
		}()
	}
	wg.Wait()
	for _, key := range keys {
		if res := s.Take(&Request{Rule: "c", Key: key, Alg: Concurrency, Limit: l, Cost: rate}, now); !res.Allowed {
			t.Fatalf("every slot released, key %s denies all of them: %+v", key, res)
		}
	}
}

// TestHotSlotsReleasesApplyOnceAndAbandonedSlotsExpire: workers acquire
// one key's slots in rounds, all at one time per round (the clock moves a
// third of the Period and a little more each round), and release them
// through their Held's box (every release of a round in two rounds of
// three, which leaves the box full when the round ends) and Release and
// Return in the third, while the heat
// moves to other keys of the shard and back, TakeAll ends it and another
// key is deleted. Every other round one worker abandons its slot, which
// must expire exactly a Period after it was taken, and releases it only
// four rounds later, after its expiry: a late release that must free
// nothing. So each round admits exactly the limit less the abandoned
// slots still live: a release lost, applied twice to another slot, or
// applied to a live slot late, changes that count.
func TestHotSlotsReleasesApplyOnceAndAbandonedSlotsExpire(t *testing.T) {
	const rate, workers, rounds = 4, 6, 240
	sec := int64(time.Second)
	l := Limit{Rate: rate, Period: 30 * sec}
	step := l.Period/3 + 1          // a slot is live for three rounds
	s := New(Config{MaxKeys: 1024}) // one shard
	base := Request{Rule: "c", Alg: Concurrency, Limit: l, Cost: 1}
	p := s.Prepare(base)
	start := int64(1_700_000_000) * sec
	var allowed [rounds]atomic.Int64
	var abandoned [rounds]atomic.Bool
	var fromHot atomic.Int64
	barrier := newBarrier(workers + 1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			type late struct {
				hd    Held
				slot  uint64
				round int
			}
			var kept []late
			for round := range rounds {
				now := start + int64(round)*step
				var hd Held
				res := p.TakeHeld("k", now, &hd)
				barrier.wait() // every worker has decided
				if res.Allowed {
					allowed[round].Add(1)
					if hd.q != nil {
						fromHot.Add(1)
					}
				}
				for len(kept) > 0 && kept[0].round+4 <= round { // long expired
					p.ReleaseHeld(&kept[0].hd, kept[0].slot, now)
					kept = kept[1:]
				}
				switch {
				case !res.Allowed:
				case round%2 == 0 && w == round/2%workers:
					abandoned[round].Store(true)
					kept = append(kept, late{hd, res.Slot, round})
				case round%3 == 0 && w%2 == 0:
					p.Release("k", res.Slot, now)
				case round%3 == 0:
					r := base
					r.Key, r.Slot = "k", res.Slot
					s.Return(&r, now)
				default:
					p.ReleaseHeld(&hd, res.Slot, now)
				}
				barrier.wait() // every slot of the round is back or kept
				barrier.wait() // and the mover has read the key
			}
		})
	}
	// The mover acts while the round's slots are released, at the round's
	// time, then reads the key: once every slot of the round is back, it
	// holds the abandoned slots still live, whether it is hot (the read
	// applies what a release left in the box) or not.
	out := make([]Result, 1)
	live := func(round int) (n int64) {
		for r := max(0, round-2); r <= round; r++ { // taken less than a Period before
			if abandoned[r].Load() {
				n++
			}
		}
		return n
	}
	for round := range rounds {
		now := start + int64(round)*step
		barrier.wait()
		switch round % 4 {
		case 0: // the heat moves to another key
			for range 2 {
				res := p.Take("other", now)
				p.Release("other", res.Slot, now)
			}
		case 1: // TakeAll names the key: its heat ends
			r := base
			r.Key, r.Cost = "k", 0
			if err := s.TakeAll([]Request{r}, out, now); err != nil {
				t.Error(err)
			}
		case 2: // the other key, hot perhaps, deleted
			r := base
			r.Key = "other"
			s.Delete(&r)
		}
		barrier.wait()
		r := base
		r.Key, r.Cost = "k", 0
		if res, want := s.Take(&r, now), rate-live(round); res.Remaining != want {
			t.Errorf("round %d, every slot back but %d abandoned: %d free, want %d", round, live(round), res.Remaining, want)
		}
		barrier.wait()
	}
	wg.Wait()
	for round := range rounds {
		live := live(round)
		if abandoned[round].Load() {
			live-- // after the round's acquisitions
		}
		if got, want := allowed[round].Load(), min(workers, rate-live); got != want {
			t.Fatalf("round %d: %d admitted, want %d (%d abandoned slots live)", round, got, want, live)
		}
	}
	if n := fromHot.Load(); n < rounds {
		t.Fatalf("%d acquisitions from the hot queue: the run tests nothing", n)
	}
}

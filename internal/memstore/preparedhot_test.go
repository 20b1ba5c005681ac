package memstore

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPreparedBatchHotKeySkipsTheShardLock: once a rate stacked on a
// quota was taken for a key twice in a row under the quota's shard lock,
// the key's quota is hot: with that lock held (here by the test itself),
// the key's batches still complete, allowed, denied by the rate and denied
// by the quota, each as TakeAll decides it on a twin store.
func TestPreparedBatchHotKeySkipsTheShardLock(t *testing.T) {
	sec := int64(time.Second)
	now := int64(1_700_000_000) * sec
	rate := Request{Rule: "rate", Alg: GCRA, Limit: Limit{Rate: 4, Period: 3600 * sec, Capacity: 4}, Cost: 1}
	day := Request{Rule: "daily", Alg: FixedWindow, Limit: Limit{Rate: 5, Period: 86400 * sec, Capacity: 5}, Cost: 1,
		WinStart: now, WinEnd: now + 86400*sec, WinNext: now + 2*86400*sec}
	s, twin := New(Config{MaxKeys: 1024}), New(Config{MaxKeys: 1024}) // one shard each
	p := s.PrepareBatch([]Request{rate, day})
	check := func(step string, at int64, allowed ...bool) {
		t.Helper()
		got, want := make([]Result, 2), make([]Result, 2)
		p.Take([]string{"k", "k"}, got, at)
		reqs := []Request{rate, day}
		reqs[0].Key, reqs[1].Key = "k", "k"
		if err := twin.TakeAll(reqs, want, at); err != nil {
			t.Fatal(err)
		}
		if got[0] != want[0] || got[1] != want[1] || got[0].Allowed != allowed[0] || got[1].Allowed != allowed[1] {
			t.Fatalf("%s: got %+v, want %+v (allowed %v)", step, got, want, allowed)
		}
	}
	for i := range 3 { // a new key, then two locked takes: hot
		check(fmt.Sprint("take ", i+1), now, true, true)
	}
	sh := &s.windows[0]
	sh.mu.Lock()
	check("allowed under the held lock", now, true, true)                       // rate 4 of 4, quota 4 of 5
	check("denied by the rate under the held lock", now, false, true)           // the quota only read
	check("allowed an hour later", now+3600*sec, true, true)                    // quota 5 of 5
	check("denied by the quota under the held lock", now+3601*sec, true, false) // the rate untouched
	sh.mu.Unlock()
	check("denied by the quota under the lock again", now+3602*sec, true, false)
}

// TestPreparedBatchHotKeyDecidesAsTakeAll: batches of a rate stacked on
// windows (a quota's explicit window, and epoch-aligned fixed and sliding
// windows), on two keys that turn hot and back, decide every check as
// TakeAll does on a twin store: through the windows' ends, denials by the
// rate and by each window, costs of zero, and lone takes and batches of
// other keys among them that retire the hot states.
func TestPreparedBatchHotKeyDecidesAsTakeAll(t *testing.T) {
	sec := int64(time.Second)
	start := int64(1_700_000_000) * sec
	quota := Request{Rule: "quota", Alg: FixedWindow, Limit: Limit{Rate: 300, Period: 40 * sec, Capacity: 300}, Cost: 1,
		WinStart: start, WinEnd: start + 40*sec, WinNext: start + 80*sec}
	for _, alg := range []Alg{FixedWindow, SlidingWindow} {
		rate := Request{Rule: "rate", Alg: GCRA, Limit: Limit{Rate: 10, Period: sec, Capacity: 12}, Cost: 1}
		win := Request{Rule: "win", Alg: alg, Limit: Limit{Rate: 20, Period: 2 * sec, Capacity: 20}, Cost: 1}
		// 256 shards: the windows' keys hot in shards of their own, mostly
		cfg := Config{MaxKeys: 1 << 18, Shards: 256}
		a, b := New(cfg), New(cfg)
		rng := rand.New(rand.NewPCG(5, uint64(alg)))
		now := start
		for i := range 30_000 {
			now += rng.Int64N(sec / 20)
			if now >= start+40*sec { // the quota's window over: the next plan's
				now = start
				a, b = New(cfg), New(cfg)
			}
			reqs := []Request{rate, quota, win}
			if rng.IntN(32) == 0 {
				reqs[rng.IntN(3)].Cost = 0
			}
			key := fmt.Sprint("k", min(rng.IntN(8), 1)) // mostly k0: hot
			if rng.IntN(64) == 0 {
				key = fmt.Sprint("new", i) // its insertion retires the hot states
			}
			keys := []string{key, key, key}
			got, want := make([]Result, 3), make([]Result, 3)
			a.PrepareBatch(reqs).Take(keys, got, now)
			for j := range reqs {
				reqs[j].Key = key
			}
			if err := b.TakeAll(reqs, want, now); err != nil {
				t.Fatal(err)
			}
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("%v batch %d (%s at %d), request %d: got %+v, want %+v", alg, i, key, now-start, j, got, want)
				}
			}
		}
	}
}

// TestPreparedBatchHotKeyNeverExceedsEitherLimit: one hot key's batches of
// a rate stacked on a quota, taken at once from several goroutines while
// lone takes race for the rate and new keys retire the quota's hot state
// again and again: every batch admitted counts under both rules and every
// one denied under neither, so that the quota ends exactly where the
// admitted batches put it, and neither rule admits past its limit. With a
// rate kept at its limit (time moving on by a third of its interval a
// batch), batches find the rate taken after they raised the quota, and
// lower it again, all the time.
func TestPreparedBatchHotKeyNeverExceedsEitherLimit(t *testing.T) {
	sec := int64(time.Second)
	start := int64(1_700_000_000) * sec
	for _, c := range []struct {
		name        string
		rate, quota Limit
		step        int64 // how far each batch moves the time on
		each        int   // batches a goroutine takes
	}{
		{"quota-binds", Limit{Rate: 3000, Period: 3600 * sec, Capacity: 3000}, Limit{Rate: 2000, Period: 86400 * sec, Capacity: 2000}, 0, 1500},
		{"rate-binds", Limit{Rate: 2000, Period: 3600 * sec, Capacity: 2000}, Limit{Rate: 3000, Period: 86400 * sec, Capacity: 3000}, 0, 1500},
		{"rate-at-its-limit", Limit{Rate: 1, Period: 3000, Capacity: 2}, Limit{Rate: 1 << 20, Period: 86400 * sec, Capacity: 1 << 20}, 1000, 20_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			rate := Request{Rule: "rate", Alg: GCRA, Limit: c.rate, Cost: 1}
			day := Request{Rule: "daily", Alg: FixedWindow, Limit: c.quota, Cost: 1,
				WinStart: start, WinEnd: start + 86400*sec, WinNext: start + 2*86400*sec}
			s := New(Config{MaxKeys: 1024}) // one shard: the new keys share the quota's lock
			p := s.PrepareBatch([]Request{rate, day})
			var batches, lone, clock atomic.Int64
			var wg sync.WaitGroup
			ready := make(chan struct{}) // all at once: a goroutine is done in a time slice
			for w := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res := make([]Result, 2)
					<-ready
					for i := range c.each {
						now := start + clock.Add(c.step)
						switch w {
						case 4: // lone takes of the rate
							if i < 500 {
								r := rate
								r.Key = "k"
								if s.Take(&r, now).Allowed {
									lone.Add(1)
								}
							}
						case 5: // new keys of the quota's shard
							if i < 300 {
								r := day
								r.Key = fmt.Sprint("other", i)
								s.Take(&r, now)
							}
						default:
							if p.Take([]string{"k", "k"}, res, now); res[0].Allowed && res[1].Allowed {
								batches.Add(1)
							}
						}
					}
				}()
			}
			close(ready)
			wg.Wait()
			now := start + clock.Load()
			peek := func(r Request) int64 {
				r.Key, r.Cost = "k", 0
				return s.Take(&r, now).Remaining
			}
			a, l := batches.Load(), lone.Load()
			if got, want := peek(day), c.quota.Rate-a; got != want || a > c.quota.Rate {
				t.Fatalf("%d batches admitted, the quota has %d left, want %d", a, got, want)
			}
			if c.step > 0 { // the rate refills: its bound over the time elapsed
				if bound := c.rate.Capacity + clock.Load()/c.rate.Period; a+l > bound {
					t.Fatalf("%d batches and %d lone takes admitted, want at most %d", a, l, bound)
				}
				return
			}
			if got, want := peek(rate), c.rate.Rate-a-l; got != want || a+l > c.rate.Rate {
				t.Fatalf("%d batches and %d lone takes admitted, the rate has %d left, want %d", a, l, got, want)
			}
			if bound := min(c.quota.Rate, c.rate.Rate-l); a != bound {
				t.Fatalf("%d batches admitted, want %d: the binding limit's", a, bound)
			}
		})
	}
}

// TestPreparedBatchHotKeyGiveBackAfterDeleteNeverFreesAFreshWindow: a hot
// batch that raised its quota and then finds the rate taken lowers the
// quota again; when the key was deleted meanwhile and taken afresh in the
// same window, the units it gives back were never counted in the fresh
// state, which must still admit no more than the quota. The interleaving
// is takeHot's, step by step: the raise (takeCounted), a Delete and the
// fresh takes, then the give-back (lowerHot's giveBack).
func TestPreparedBatchHotKeyGiveBackAfterDeleteNeverFreesAFreshWindow(t *testing.T) {
	sec := int64(time.Second)
	now := int64(1_700_000_000) * sec
	rate := Request{Rule: "rate", Alg: GCRA, Limit: Limit{Rate: 100, Period: 3600 * sec, Capacity: 100}, Cost: 1}
	day := Request{Rule: "daily", Alg: FixedWindow, Limit: Limit{Rate: 5, Period: 86400 * sec, Capacity: 5}, Cost: 1,
		WinStart: now, WinEnd: now + 86400*sec, WinNext: now + 2*86400*sec}
	s := New(Config{MaxKeys: 1024}) // one shard
	p := s.PrepareBatch([]Request{rate, day})
	res := make([]Result, 2)
	for range 3 { // a new key, then two locked takes: the quota hot
		p.Take([]string{"k", "k"}, res, now)
	}
	sh := &s.windows[0]
	c := sh.hot.Load()
	if c == nil {
		t.Fatal("the quota is not hot after three batches")
	}
	var raised Result
	if !c.takeCounted(&p.reqs[1], now, &raised) || !raised.Allowed { // the batch's raise
		t.Fatalf("the raise of the hot quota: %+v", raised)
	}
	d := day
	d.Key = "k"
	s.Delete(&d)
	admitted := 0
	for range 5 { // the fresh state, taken to its limit
		if s.Take(&d, now).Allowed {
			admitted++
		}
	}
	sh.giveBack(c, 1) // the rate denied the batch after all
	if s.Take(&d, now).Allowed {
		admitted++
	}
	if admitted > 5 {
		t.Fatalf("%d admitted by a quota of 5 after its key was deleted", admitted)
	}
}

// TestPreparedBatchHotKeyDeniedAfterTheWindowMovedOnChargesNothing: a hot
// batch raises its sliding window, then a check in the next window moves
// the key on (the raised count becomes the previous window's), and then
// the rate denies the batch: the unit it gives back leaves the previous
// count too, so the key weighs exactly what a twin store that never saw
// the denied batch weighs. The interleaving is takeHot's, step by step.
func TestPreparedBatchHotKeyDeniedAfterTheWindowMovedOnChargesNothing(t *testing.T) {
	sec := int64(time.Second)
	now := int64(1_700_000_000) * sec // a multiple of the window's 10 s
	rate := Request{Rule: "rate", Alg: GCRA, Limit: Limit{Rate: 100, Period: 3600 * sec, Capacity: 100}, Cost: 1}
	win := Request{Rule: "win", Alg: SlidingWindow, Limit: Limit{Rate: 10, Period: 10 * sec, Capacity: 10}, Cost: 1}
	s, twin := New(Config{MaxKeys: 1024}), New(Config{MaxKeys: 1024}) // one shard each
	p := s.PrepareBatch([]Request{rate, win})
	res := make([]Result, 2)
	for range 3 { // a new key, then two locked takes: the window hot
		p.Take([]string{"k", "k"}, res, now)
		reqs := []Request{rate, win}
		reqs[0].Key, reqs[1].Key = "k", "k"
		if err := twin.TakeAll(reqs, res, now); err != nil {
			t.Fatal(err)
		}
	}
	sh := &s.windows[0]
	c := sh.hot.Load()
	if c == nil {
		t.Fatal("the window is not hot after three batches")
	}
	var raised Result
	if !c.takeCounted(&p.reqs[1], now, &raised) || !raised.Allowed { // the batch's raise
		t.Fatalf("the raise of the hot window: %+v", raised)
	}
	w := win
	w.Key = "k"
	for _, st := range []*Store{s, twin} { // a check in the next window
		st.Take(&w, now+12*sec)
	}
	sh.giveBack(c, 1) // the rate denied the batch after all
	w.Cost = 0
	if got, want := s.Take(&w, now+12*sec), twin.Take(&w, now+12*sec); got != want {
		t.Fatalf("after a denied batch: %+v, want %+v as if it never ran", got, want)
	}
}

package memstore

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPreparedBatchTakesAsTakeAll: a prepared batch decides exactly as
// TakeAll of the same requests, on the same state, all-or-nothing: the two
// interleaved on one store agree with TakeAll alone on a twin store, for a
// rate stacked on an explicit (quota) window and on the other algorithms,
// with the same key for every rule and with keys of their own.
func TestPreparedBatchTakesAsTakeAll(t *testing.T) {
	sec := int64(time.Second)
	start := int64(1_700_000_000) * sec
	day := Request{Rule: "daily", Alg: FixedWindow, Limit: Limit{Rate: 40, Period: 3 * sec, Capacity: 40}, Cost: 1,
		WinStart: start, WinEnd: start + 3*sec, WinNext: start + 6*sec}
	for _, alg := range []Alg{GCRA, SlidingWindow, FixedWindow, SlidingLog} {
		for _, sameKey := range []bool{true, false} {
			rate := Request{Rule: "rate", Alg: alg, Limit: Limit{Rate: 5, Period: sec, Capacity: 5}, Cost: 1}
			if alg == GCRA {
				rate.Limit.Capacity = 8
			}
			reqs := []Request{rate, day}
			a, b := New(Config{MaxKeys: 4096}), New(Config{MaxKeys: 4096})
			p := a.PrepareBatch(reqs)
			rng := rand.New(rand.NewPCG(11, uint64(alg)))
			now := start
			for i := range 20_000 {
				now = start + (now-start+rng.Int64N(sec/16))%(3*sec) // inside the explicit window
				keys := []string{fmt.Sprint("k", rng.IntN(20)), ""}
				keys[1] = keys[0]
				if !sameKey {
					keys[1] = fmt.Sprint("k", rng.IntN(20))
				}
				full := append([]Request(nil), reqs...)
				full[0].Key, full[1].Key = keys[0], keys[1]
				got, want := make([]Result, 2), make([]Result, 2)
				if i%2 == 0 {
					p.Take(keys, got, now)
				} else if err := a.TakeAll(full, got, now); err != nil {
					t.Fatal(err)
				}
				if err := b.TakeAll(full, want, now); err != nil {
					t.Fatal(err)
				}
				if got[0] != want[0] || got[1] != want[1] {
					t.Fatalf("%v same key %v, request %d (%v at %d): got %+v, want %+v", alg, sameKey, i, keys, now, got, want)
				}
			}
		}
	}
}

// TestPreparedBatchTakeAllocatesNothing: the prepared batch's working
// memory stays on the stack.
func TestPreparedBatchTakeAllocatesNothing(t *testing.T) {
	s := New(Config{MaxKeys: 1024})
	p := s.PrepareBatch([]Request{
		{Rule: "a", Alg: GCRA, Limit: Limit{Rate: 1000, Period: int64(time.Second), Capacity: 1000}, Cost: 1},
		{Rule: "b", Alg: FixedWindow, Limit: Limit{Rate: 1000, Period: int64(time.Second), Capacity: 1000}, Cost: 1},
	})
	keys, res := []string{"k", "k"}, make([]Result, 2)
	now := int64(1_700_000_000) * int64(time.Second)
	if n := testing.AllocsPerRun(100, func() { p.Take(keys, res, now) }); n != 0 {
		t.Errorf("Take allocates %v times, want 0", n)
	}
}

// TestPreparedBatchIsAllOrNothingUnderRaces: a rate stacked on a window,
// one key, taken at once by prepared batches (whose rate is swapped in
// without its shard's lock), by TakeAll and by lone takes of the rate:
// every batch admitted counts under both rules and every one denied under
// neither, so that the states end exactly where the admissions put them,
// and neither rule admits past its limit.
func TestPreparedBatchIsAllOrNothingUnderRaces(t *testing.T) {
	sec := int64(time.Second)
	now := int64(1_700_000_000) * sec
	rate := Request{Rule: "rate", Alg: GCRA, Limit: Limit{Rate: 3000, Period: 3600 * sec, Capacity: 3000}, Cost: 1}
	day := Request{Rule: "daily", Alg: FixedWindow, Limit: Limit{Rate: 2000, Period: 3600 * sec, Capacity: 2000}, Cost: 1,
		WinStart: now, WinEnd: now + 3600*sec, WinNext: now + 7200*sec}
	for round := range 10 {
		s := New(Config{MaxKeys: 1024})
		p := s.PrepareBatch([]Request{rate, day})
		key := fmt.Sprint("k", round)
		var batches, lone atomic.Int64
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reqs := []Request{rate, day}
				reqs[0].Key, reqs[1].Key = key, key
				res := make([]Result, 2)
				for range 1500 {
					switch w {
					case 0, 1:
						p.Take([]string{key, key}, res, now)
					case 2:
						if err := s.TakeAll(reqs, res, now); err != nil {
							t.Error(err)
							return
						}
					case 3:
						r := reqs[0]
						if s.Take(&r, now).Allowed {
							lone.Add(1)
						}
						continue
					}
					if res[0].Allowed && res[1].Allowed { // else denied, by one rule or both
						batches.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		peek := func(r Request) int64 {
			r.Key, r.Cost = key, 0
			return s.Take(&r, now).Remaining
		}
		a, l := batches.Load(), lone.Load()
		if got, want := peek(day), 2000-a; got != want || a > 2000 {
			t.Fatalf("round %d: %d batches admitted, the window has %d left, want %d", round, a, got, want)
		}
		if got, want := peek(rate), 3000-a-l; got != want || a+l > 3000 {
			t.Fatalf("round %d: %d batches and %d lone takes admitted, the rate has %d left, want %d", round, a, l, got, want)
		}
	}
}

// TestPreparedBatchRateDenialLeavesWindowsAlone: a batch that its rate
// denies changes no window: a window key it names for the first time is
// not inserted, so a full shard evicts none of its limited keys for it.
func TestPreparedBatchRateDenialLeavesWindowsAlone(t *testing.T) {
	sec := int64(time.Second)
	now := int64(1_700_000_000) * sec
	rate := Request{Rule: "rate", Alg: GCRA, Limit: Limit{Rate: 1, Period: 3600 * sec, Capacity: 1}, Cost: 1}
	day := Request{Rule: "daily", Alg: FixedWindow, Limit: Limit{Rate: 1, Period: 86400 * sec, Capacity: 1}, Cost: 1,
		WinStart: now, WinEnd: now + 86400*sec, WinNext: now + 2*86400*sec}
	s := New(Config{MaxKeys: 1024}) // one shard of 1024 keys a table
	p := s.PrepareBatch([]Request{rate, day})
	full := make([]string, 1024)
	for i := range full { // every window key used up for the day
		full[i] = fmt.Sprint("w", i)
		r := day
		r.Key = full[i]
		if !s.Take(&r, now).Allowed {
			t.Fatalf("window key %d denied its first take", i)
		}
	}
	r := rate
	r.Key = "rated"
	s.Take(&r, now) // the rate's key used up: it has a state, and denies
	res := make([]Result, 2)
	for i := range 100 {
		p.Take([]string{"rated", fmt.Sprint("new", i)}, res, now+sec)
		if res[0].Allowed || !res[1].Allowed {
			t.Fatalf("batch %d: got %+v, want denied by the rate alone", i, res)
		}
	}
	for i, key := range full {
		r := day
		r.Key, r.Cost = key, 0
		if got := s.Take(&r, now+sec); got.Allowed {
			t.Fatalf("window key %d (%s) was reset: %+v", i, key, got)
		}
	}
}

// BenchmarkPreparedBatch measures a rate stacked on a daily quota, in
// parallel, on one hot key and on 10,000 keys: allowed (an unlimited
// rate), and denied by the rate (one an hour, spent), which only reads the
// quota's window.
func BenchmarkPreparedBatch(b *testing.B) {
	sec := int64(time.Second)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, deny := range []bool{false, true} {
		for _, keys := range []int{1, 10_000} {
			name := fmt.Sprintf("allow/keys=%d", keys)
			rl := Limit{Rate: 1 << 30, Period: 3600 * sec, Capacity: 1 << 30}
			if deny {
				name = fmt.Sprintf("deny/keys=%d", keys)
				rl = Limit{Rate: 1, Period: 3600 * sec, Capacity: 1}
			}
			b.Run(name, func(b *testing.B) {
				s := New(Config{})
				p := s.PrepareBatch([]Request{
					{Rule: "rate", Alg: GCRA, Limit: rl, Cost: 1},
					{Rule: "daily", Alg: FixedWindow, Limit: Limit{Rate: 1e9, Period: 86400 * sec, Capacity: 1e9}, Cost: 1,
						WinStart: start, WinEnd: start + 86400*sec, WinNext: start + 2*86400*sec},
				})
				names := make([]string, keys)
				res := make([]Result, 2)
				for i := range names {
					names[i] = fmt.Sprint("10.0.", i)
					p.Take([]string{names[i], names[i]}, res, start) // a state of its own: see takeSwapping
				}
				var seq atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(seq.Add(7919))
					now := start + sec
					var res [2]Result
					k := []string{"", ""}
					for pb.Next() {
						i++
						k[0] = names[i%keys]
						k[1] = k[0]
						now += 100
						p.Take(k, res[:], now)
						if res[0].Allowed == deny {
							b.Error("unexpected decision")
							return
						}
					}
				})
			})
		}
	}
}

// staleResult has every field of a Result set to what no decision gives:
// a batch writes each of its results whole, so none of it may survive.
var staleResult = Result{Allowed: true, Remaining: -7, RetryAfter: -7, ResetAfter: -7, Delay: -7, Slot: 7 << 40, Next: -7}

// TestBatchResultsOverwriteStaleResults: TakeAll and a prepared batch
// write every field of every result, whatever the slice held before (the
// last round's results, reused): allowed, denied and rolled back, a
// settlement (Force), explicit windows, a denial by the GCRA rule that
// peeks at the others, and SlidingLog, Concurrency and GCRA requests beside
// the windows. A twin store given zeroed results agrees on each one.
func TestBatchResultsOverwriteStaleResults(t *testing.T) {
	sec := int64(time.Second)
	start := int64(1_700_000_000) * sec
	day := Request{Rule: "daily", Alg: FixedWindow, Limit: Limit{Rate: 30, Period: 3 * sec, Capacity: 30}, Cost: 1,
		WinStart: start, WinEnd: start + 3*sec, WinNext: start + 6*sec}
	for _, alg := range []Alg{GCRA, SlidingWindow, FixedWindow, SlidingLog, Concurrency} {
		rate := Request{Rule: "rate", Alg: alg, Limit: Limit{Rate: 4, Period: sec, Capacity: 4}, Cost: 1}
		win := Request{Rule: "win", Alg: SlidingWindow, Limit: Limit{Rate: 6, Period: sec, Capacity: 6}, Cost: 1}
		a, b := New(Config{MaxKeys: 4096}), New(Config{MaxKeys: 4096})
		var p *PreparedBatch
		if alg != Concurrency {
			p = a.PrepareBatch([]Request{rate, day, win})
		}
		rng := rand.New(rand.NewPCG(17, uint64(alg)))
		got := make([]Result, 3)
		now := start
		for i := range 5000 {
			now = start + (now-start+rng.Int64N(sec/8))%(3*sec) // inside the explicit window
			key := fmt.Sprint("k", rng.IntN(6))
			full := []Request{rate, day, win}
			for j := range full {
				full[j].Key = key
			}
			force := rng.IntN(8) == 0
			if force && alg != Concurrency && alg != SlidingLog {
				full[0].Force, full[0].Cost = true, rng.Int64N(3)
			}
			for j := range got {
				if rng.IntN(2) == 0 {
					got[j] = staleResult // else the last round's
				}
			}
			if p != nil && !force && i%2 == 0 {
				p.Take([]string{key, key, key}, got, now)
			} else if err := a.TakeAll(full, got, now); err != nil {
				t.Fatal(err)
			}
			want := make([]Result, 3)
			if err := b.TakeAll(full, want, now); err != nil {
				t.Fatal(err)
			}
			if alg == Concurrency { // a token of the store's shard
				got[0].Slot, want[0].Slot = min(got[0].Slot, 1), min(want[0].Slot, 1)
			}
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("%v request %d, result %d (force %v at %d): got %+v, want %+v", alg, i, j, force, now, got[j], want[j])
				}
			}
		}
	}
}

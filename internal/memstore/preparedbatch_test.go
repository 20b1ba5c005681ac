package memstore

import (
	"fmt"
	"math/rand/v2"
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

package memstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// stale is a Result no check gives, written into the Result that
// TakeInto and TakeDelayed are given, so that a field they leave unwritten
// shows.
var stale = Result{Allowed: true, Remaining: -7, RetryAfter: -7, ResetAfter: -7, Delay: -7, Slot: 7, Next: -7}

// TestPreparedTakesAsTake: a prepared check decides exactly as Take of the
// same request, on the same state: the two interleaved on one store agree
// with Take alone on a twin store, for every algorithm Prepare accepts,
// and TakeInto writes every field of the Result it is given.
func TestPreparedTakesAsTake(t *testing.T) {
	for _, alg := range []Alg{GCRA, SlidingWindow, FixedWindow, SlidingLog} {
		l := Limit{Rate: 5, Period: int64(time.Second), Capacity: 5}
		if alg == GCRA {
			l.Capacity = 8
		}
		a, b := New(Config{MaxKeys: 4096}), New(Config{MaxKeys: 4096})
		p := a.Prepare(Request{Rule: "r", Alg: alg, Limit: l, Cost: 1})
		rng := rand.New(rand.NewPCG(7, uint64(alg)))
		now := int64(1_700_000_000) * int64(time.Second)
		for i := range 20_000 {
			now += rng.Int64N(int64(time.Second)/8) - int64(time.Second)/80 // now and then back
			key := fmt.Sprint("k", rng.IntN(50))
			req := Request{Rule: "r", Key: key, Alg: alg, Limit: l, Cost: 1}
			got := stale
			if i%2 == 0 {
				p.TakeInto(key, now, &got)
			} else {
				got = a.Take(&req, now)
			}
			if want := b.Take(&req, now); got != want {
				t.Fatalf("%v request %d (%s at %d): got %+v, want %+v", alg, i, key, now, got, want)
			}
		}
	}
}

func TestPrepareRefusesWhatItCannotServe(t *testing.T) {
	s := New(Config{})
	l := Limit{Rate: 1, Period: 1, Capacity: 1}
	for _, r := range []Request{
		{Alg: FixedWindow, Limit: l, WinStart: 1, WinEnd: 2},
		{Alg: GCRA},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Prepare(%+v) did not panic", r)
				}
			}()
			s.Prepare(r)
		}()
	}
}

// TestPreparedTakeDelayedReservesAsTake: a prepared check given a
// reservation horizon decides exactly as Take of the same request with
// that MaxDelay, reservations (Delay) included, whatever the horizon of
// each request.
func TestPreparedTakeDelayedReservesAsTake(t *testing.T) {
	l := Limit{Rate: 5, Period: int64(time.Second), Capacity: 2}
	a, b := New(Config{MaxKeys: 4096}), New(Config{MaxKeys: 4096})
	p := a.Prepare(Request{Rule: "r", Alg: GCRA, Limit: l, Cost: 1})
	rng := rand.New(rand.NewPCG(9, 9))
	now := int64(1_700_000_000) * int64(time.Second)
	delayed := 0
	for i := range 20_000 {
		now += rng.Int64N(int64(time.Second) / 20)
		key := fmt.Sprint("k", rng.IntN(20))
		maxDelay := rng.Int64N(int64(time.Second))
		req := Request{Rule: "r", Key: key, Alg: GCRA, Limit: l, Cost: 1, MaxDelay: maxDelay}
		got := stale
		p.TakeDelayed(key, now, maxDelay, &got)
		if want := b.Take(&req, now); got != want {
			t.Fatalf("request %d (%s at %d, horizon %d): got %+v, want %+v", i, key, now, maxDelay, got, want)
		}
		if got.Delay > 0 {
			delayed++
		}
	}
	if delayed == 0 {
		t.Fatal("no request was reserved: the test says nothing about reservations")
	}
}

// TestPreparedConcurrencyTakesAndReleasesAsTakeAndReturn: a prepared
// Concurrency check takes slots exactly as Take and gives them back
// exactly as Return of the same request with the slot Take named, on the
// same state: interleaved with Take and Return on one store, it agrees
// with them alone on a twin store.
func TestPreparedConcurrencyTakesAndReleasesAsTakeAndReturn(t *testing.T) {
	l := Limit{Rate: 3, Period: int64(time.Minute), Capacity: 3}
	a, b := New(Config{MaxKeys: 4096}), New(Config{MaxKeys: 4096})
	p := a.Prepare(Request{Rule: "c", Alg: Concurrency, Limit: l, Cost: 1})
	rng := rand.New(rand.NewPCG(5, 5))
	now := int64(1_700_000_000) * int64(time.Second)
	type inflight struct {
		key          string
		slotA, slotB uint64
	}
	var held []inflight
	for i := range 20_000 {
		now += rng.Int64N(int64(time.Second))
		req := Request{Rule: "c", Alg: Concurrency, Limit: l, Cost: 1}
		if len(held) > 0 && rng.IntN(2) == 0 {
			j := rng.IntN(len(held))
			f := held[j]
			held = append(held[:j], held[j+1:]...)
			req.Key = f.key
			if i%2 == 0 {
				p.Release(f.key, f.slotA, now)
			} else {
				req.Slot = f.slotA
				a.Return(&req, now)
			}
			req.Slot = f.slotB
			b.Return(&req, now)
			continue
		}
		req.Key = fmt.Sprint("k", rng.IntN(5))
		var got Result
		if i%2 == 0 {
			got = p.Take(req.Key, now)
		} else {
			got = a.Take(&req, now)
		}
		want := b.Take(&req, now)
		if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.RetryAfter != want.RetryAfter {
			t.Fatalf("request %d (%s at %d): got %+v, want %+v", i, req.Key, now, got, want)
		}
		if got.Allowed {
			held = append(held, inflight{req.Key, got.Slot, want.Slot})
		}
	}
}

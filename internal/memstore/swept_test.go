package memstore

import (
	"fmt"
	"testing"
	"time"
)

// TestSweptKeyDoesNotReopenItsWindow: a fixed-window key dropped as expired
// by another key's insertion, then hit by a request stamped inside its old
// window (a caller whose clock lags), does not get that window back: the
// request counts at the shard's swept time, so the two windows it touches
// hold at most their 2*Rate.
func TestSweptKeyDoesNotReopenItsWindow(t *testing.T) {
	s := New(Config{MaxKeys: 1024}) // one shard of 1024 keys
	p := int64(time.Minute)
	l := Limit{Rate: 5, Period: p, Capacity: 5}
	key := Request{Key: "k", Alg: FixedWindow, Limit: l, Cost: 1}
	admitted := 0
	for i := 0; i < 5; i++ {
		if s.Take(&key, 10).Allowed {
			admitted++
		}
	}
	// Fill the shard with live keys (hour windows), so that the next new
	// key finds it full and drops the expired one: k.
	hour := Limit{Rate: 5, Period: int64(time.Hour), Capacity: 5}
	for i := 0; s.Len() < s.perCap; i++ {
		f := Request{Key: fmt.Sprint("filler", i), Alg: FixedWindow, Limit: hour, Cost: 1}
		s.Take(&f, 10)
	}
	other := Request{Key: "other", Alg: FixedWindow, Limit: l, Cost: 1}
	s.Take(&other, p+1) // the next window: k's state has expired and is swept
	if n := s.Len(); n != s.perCap {
		t.Fatalf("%d keys after the sweep, want %d (k dropped, other added)", n, s.perCap)
	}
	peek := key
	peek.Cost = 0
	if got := s.Take(&peek, p+1); got.Remaining != 5 {
		t.Fatalf("k has %d left after the sweep, want 5 (dropped)", got.Remaining)
	}
	if s.Take(&key, p-1).Allowed { // stamped in k's first window
		admitted++
	}
	for i := 0; i < 10; i++ {
		if s.Take(&key, p+2).Allowed {
			admitted++
		}
	}
	if admitted > 10 {
		t.Fatalf("%d admitted over two windows of 5", admitted)
	}
}

// TestSlotsAmortised: a key whose acquisitions are released out of order
// (the newest first) keeps a queue no longer than what is held plus the
// tombstones compaction allows.
func TestSlotsAmortised(t *testing.T) {
	var q slots
	var seq uint64
	l := Limit{Rate: 1 << 20, Period: int64(time.Hour), Capacity: 1 << 20}
	first := q.take(0, l, 1, &seq) // held throughout
	for i := int64(1); i <= 100_000; i++ {
		a := q.take(i, l, 1, &seq)
		b := q.take(i, l, 1, &seq)
		q.release(i, a.Slot, 1) // the middle one: a tombstone
		q.release(i, b.Slot, 1)
		if n := len(q.q) - int(q.head); n > 64 {
			t.Fatalf("after %d rounds the queue holds %d entries for 1 slot in flight", i, n)
		}
	}
	if q.inflight != 1 || !first.Allowed {
		t.Fatalf("in flight %d, want 1", q.inflight)
	}
	q.release(200_000, first.Slot, 1)
	if q.inflight != 0 || len(q.q) != int(q.head) {
		t.Fatalf("after the last release: %d in flight, %d entries", q.inflight, len(q.q)-int(q.head))
	}
}

// TestTakeAllRollsBackSlots: a Concurrency acquisition in a TakeAll that
// another request denies is undone (the key named twice as well), and an
// allowed TakeAll reports each acquisition's token.
func TestTakeAllRollsBackSlots(t *testing.T) {
	s := New(Config{})
	conc := Request{Key: "c", Alg: Concurrency, Limit: Limit{Rate: 3, Period: int64(time.Minute), Capacity: 3}, Cost: 1}
	tight := Request{Key: "g", Alg: GCRA, Limit: Limit{Rate: 1, Period: int64(time.Minute), Capacity: 1}, Cost: 1}
	res := make([]Result, 3)
	if err := s.TakeAll([]Request{conc, conc, tight}, res, 0); err != nil || !res[2].Allowed {
		t.Fatalf("first batch: %+v, %v", res, err)
	}
	if res[0].Slot == 0 || res[1].Slot == 0 || res[0].Slot == res[1].Slot {
		t.Fatalf("tokens %d, %d: want two distinct", res[0].Slot, res[1].Slot)
	}
	if err := s.TakeAll([]Request{conc, tight, conc}, res, 1); err != nil || res[1].Allowed {
		t.Fatalf("second batch should be denied by g: %+v, %v", res, err)
	}
	if res[0].Slot != 0 || res[2].Slot != 0 {
		t.Fatalf("a rolled-back acquisition reported tokens %d, %d", res[0].Slot, res[2].Slot)
	}
	peek := conc
	peek.Cost = 0
	if got := s.Take(&peek, 2); got.Remaining != 1 {
		t.Fatalf("after the denied batch: %d slots free, want 1 (two held by the first batch)", got.Remaining)
	}
}

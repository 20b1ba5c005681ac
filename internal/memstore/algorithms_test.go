package memstore

import (
	"math"
	"testing"
	"time"
)

func TestMulDiv(t *testing.T) {
	cases := []struct{ a, b, c, floor, ceil int64 }{
		{10, 54, 60, 9, 9},
		{7, 3, 2, 10, 11},
		{1<<31 - 1, int64(30 * 24 * time.Hour), int64(30 * 24 * time.Hour), 1<<31 - 1, 1<<31 - 1},
		{1<<31 - 1, math.MaxInt64, 1, math.MaxInt64, math.MaxInt64}, // saturates
		{0, 5, 3, 0, 0},
	}
	for _, c := range cases {
		if got := mulDiv(c.a, c.b, c.c); got != c.floor {
			t.Errorf("mulDiv(%d, %d, %d) = %d, want %d", c.a, c.b, c.c, got, c.floor)
		}
		if got := mulDivCeil(c.a, c.b, c.c); got != c.ceil {
			t.Errorf("mulDivCeil(%d, %d, %d) = %d, want %d", c.a, c.b, c.c, got, c.ceil)
		}
	}
}

func TestMod(t *testing.T) {
	if mod(-1, 10) != 9 || mod(-10, 10) != 0 || mod(25, 10) != 5 {
		t.Fatal("mod must be non-negative")
	}
}

// TestGCRAUnevenInterval: 3 per second has an interval of 333,333,334ns
// (rounded up), so three events never take less than a second.
func TestGCRAUnevenInterval(t *testing.T) {
	l := Limit{Rate: 3, Period: int64(time.Second), Capacity: 3}
	var tat int64
	now := int64(0)
	var res Result
	for i := 0; i < 3; i++ {
		tat, res = gcra(tat, now, l, 1)
		if !res.Allowed {
			t.Fatalf("event %d denied", i)
		}
	}
	_, res = gcra(tat, now, l, 1)
	if res.Allowed || res.RetryAfter != 333_333_334 {
		t.Fatalf("fourth event: %+v", res)
	}
	if _, res = gcra(tat, now+333_333_333, l, 1); res.Allowed {
		t.Fatal("allowed a nanosecond early")
	}
	if _, res = gcra(tat, now+333_333_334, l, 1); !res.Allowed {
		t.Fatal("denied on time")
	}
}

// TestSlidingWindowHugeCounts runs a month-long sliding window at the
// largest count: the weighted products exceed 64 bits and must stay exact.
func TestSlidingWindowHugeCounts(t *testing.T) {
	month := int64(30 * 24 * time.Hour)
	l := Limit{Rate: 1<<31 - 1, Period: month, Capacity: 1<<31 - 1}
	start := int64(1_800_000_000) * int64(time.Second)
	start -= mod(start, month)
	w, res := slidingWindow(window{}, start, l, l.Rate)
	if !res.Allowed || res.Remaining != 0 {
		t.Fatalf("filling the window: %+v", res)
	}
	// Half-way through the next window the previous count weighs half.
	now := start + month + month/2
	_, res = slidingWindow(w, now, l, 1)
	if !res.Allowed || res.Remaining != l.Rate-1-(l.Rate+1)/2 {
		t.Fatalf("half-way: %+v, want remaining %d", res, l.Rate-1-(l.Rate+1)/2)
	}
	_, res = slidingWindow(w, start+month, l, 1)
	if res.Allowed || res.RetryAfter <= 0 || res.RetryAfter > month {
		t.Fatalf("at the boundary: %+v", res)
	}
}

func TestWindowsBefore1970(t *testing.T) {
	l := Limit{Rate: 1, Period: int64(time.Minute), Capacity: 1}
	now := -int64(90 * time.Second) // 1969-12-31T23:58:30Z
	w, res := fixedWindow(window{}, now, l, 1, 0)
	if !res.Allowed || w.Expires != -int64(time.Minute) {
		t.Fatalf("window end %d, want -60s: %+v", w.Expires, res)
	}
	if _, res = fixedWindow(w, now, l, 1, 0); res.RetryAfter != int64(30*time.Second) {
		t.Fatalf("retry after %v, want 30s", time.Duration(res.RetryAfter))
	}
}

func TestSortUnique(t *testing.T) {
	got := sortUnique([]int{5, 1, 5, 3, 1, 9})
	want := []int{1, 3, 5, 9}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
}

func TestTakeAllTooMany(t *testing.T) {
	s := New(Config{})
	reqs := make([]Request, MaxBatch+1)
	if err := s.TakeAll(reqs, make([]Result, len(reqs)), 0); err != ErrTooManyRequests {
		t.Fatalf("%v", err)
	}
}

// TestLoweredLimitNeverNegative: a key whose limit drops below its usage
// reports zero remaining, never a negative count.
func TestLoweredLimitNeverNegative(t *testing.T) {
	high := Limit{Rate: 10, Period: int64(time.Minute), Capacity: 10}
	low := Limit{Rate: 2, Period: int64(time.Minute), Capacity: 2}
	w, _ := fixedWindow(window{}, 0, high, 5, 0)
	if _, res := fixedWindow(w, 0, low, 1, 0); res.Allowed || res.Remaining != 0 {
		t.Fatalf("fixed window: %+v", res)
	}
	var c slots
	var seq uint64
	c.take(0, high, 5, &seq)
	if res := c.take(0, low, 1, &seq); res.Allowed || res.Remaining != 0 {
		t.Fatalf("concurrency: %+v", res)
	}
	// An explicit window that has already ended never reports negative waits.
	if _, res := fixedWindow(window{}, 100, high, 1, 50); res.ResetAfter != 0 || res.RetryAfter != 0 {
		t.Fatalf("ended window: %+v", res)
	}
}

// TestTakeAllAllocatesNothing: a batch of GCRA and window requests, allowed
// or denied and rolled back, is decided without a heap allocation (the
// multi-rule request path calls TakeAll on every request).
func TestTakeAllAllocatesNothing(t *testing.T) {
	s := New(Config{})
	lim := Limit{Rate: 1e9, Period: int64(time.Second), Capacity: 1e9}
	reqs := []Request{
		{Rule: "a", Key: "k", Alg: GCRA, Limit: lim, Cost: 1},
		{Rule: "b", Key: "k", Alg: FixedWindow, Limit: lim, Cost: 1},
		{Rule: "c", Key: "k", Alg: GCRA, Limit: lim, Cost: 1},
	}
	res := make([]Result, len(reqs))
	now := int64(time.Hour)
	run := func() {
		if err := s.TakeAll(reqs, res, now); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if allocs := testing.AllocsPerRun(100, run); allocs != 0 || !res[0].Allowed {
		t.Fatalf("allowed batch: %.1f allocs, results %+v", allocs, res)
	}
	reqs[2].Limit = Limit{Rate: 1, Period: int64(time.Hour), Capacity: 1}
	run() // takes c's only unit
	if allocs := testing.AllocsPerRun(100, run); allocs != 0 || res[2].Allowed {
		t.Fatalf("denied batch: %.1f allocs, results %+v", allocs, res)
	}
}

// TestForcedGCRAChargeIsKeptAnyYear: a settlement's debt is bounded
// relative to now, so a clock far in the future (2050, a test's clock set
// forward) keeps the charge, and the largest charge leaves a sane state.
func TestForcedGCRAChargeIsKeptAnyYear(t *testing.T) {
	l := Limit{Rate: 10, Period: int64(time.Second), Capacity: 10}
	for _, now := range []int64{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()} {
		tat, res := gcraForce(0, now, &Request{Limit: l, Cost: 5, Force: true})
		if !res.Allowed || res.Remaining != 5 || res.Slot != uint64(tat) {
			t.Fatalf("at %d: forced 5 of 10: %+v (tat %d); want allowed, Remaining 5, the tat as Slot", now, res, tat)
		}
		tat, res = gcraForce(tat, now, &Request{Limit: l, Cost: math.MaxInt32, Force: true})
		if tat <= now || res.Allowed || res.RetryAfter <= 0 || res.ResetAfter <= 0 || res.Remaining != 0 {
			t.Fatalf("at %d: the largest forced charge: tat %d, %+v; want a debt far ahead", now, tat, res)
		}
	}
}

// TestForcedTakeIsNeverAReservation: a settlement that fits reports no
// Delay, whatever the key's state after it.
func TestForcedTakeIsNeverAReservation(t *testing.T) {
	l := Limit{Rate: 10, Period: int64(time.Second), Capacity: 10}
	if _, res := gcraForce(0, 1e18, &Request{Limit: l, Cost: 10, Force: true}); !res.Allowed || res.Delay != 0 || res.Slot == 0 {
		t.Fatalf("forced take of the whole capacity: %+v; want Allowed, a Slot and no Delay", res)
	}
}

// TestReservationsAreLimitedByMaxDelayWithoutOverflow: a horizon of
// math.MaxInt64 admits what fits and reserves what does not.
func TestReservationsAreLimitedByMaxDelayWithoutOverflow(t *testing.T) {
	l := Limit{Rate: 10, Period: int64(time.Second), Capacity: 1}
	r := &Request{Limit: l, Cost: 1, MaxDelay: math.MaxInt64}
	tat, d := gcraDecide(0, 1e18, r)
	if !d.allowed || d.result(1e18, r).Delay != 0 {
		t.Fatalf("first request: %+v", d)
	}
	if _, d = gcraDecide(tat, 1e18, r); !d.allowed || d.result(1e18, r).Delay != int64(100*time.Millisecond) {
		t.Fatalf("second request: %+v; want a reservation 100ms ahead", d)
	}
}

package ratelimittest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// A request under a new limit for a key (a reloaded rule, a tenant changing
// plan) reads what the key used under the old one: raising a limit gives
// its new headroom at once, lowering it keeps what was used.

// changed is req under limit l.
func changed(req stores.Request, l ratelimit.Limit) stores.Request {
	req.Limit = l
	return req
}

// admitted takes req until it is denied, at most limit+1 times, and
// returns how many were allowed.
func (st *storeTester) admitted(req stores.Request, limit int) int {
	st.t.Helper()
	n := 0
	for n <= limit && st.admit(req) {
		n++
	}
	return n
}

// use takes req n times and fails the test unless each is allowed.
func (st *storeTester) use(req stores.Request, n int) {
	st.t.Helper()
	for i := range n {
		if !st.admit(req) {
			st.t.Fatalf("%v: take %d of %d under %v denied at +%v", req.Algorithm, i+1, n, req.Limit, st.elapsed())
		}
	}
}

// changeAlgorithms are the algorithms a limit change is checked on:
// Concurrency counts slots in flight (it takes no Period-based refill, and
// its slots live a minute here).
var changeAlgorithms = []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.Concurrency, ratelimit.SlidingLog}

var changeCases = []struct {
	name string
	run  func(t *testing.T, st *storeTester)
}{
	// The incident: a key used all of PerMinute(5), the limit is raised to
	// PerMinute(20) within the minute, and the key has 15 more at once.
	{"LimitChange/raise-gives-new-headroom-at-once", func(t *testing.T, st *storeTester) {
		for _, a := range changeAlgorithms {
			req := withAlg(gcra("raise-"+a.String(), ratelimit.PerMinute(5), 1), a)
			if n := st.admitted(req, 5); n != 5 {
				t.Fatalf("%v: %d of PerMinute(5) allowed, want 5", a, n)
			}
			st.clock.Advance(ms)
			raised := changed(req, ratelimit.PerMinute(20))
			st.wantRemaining(raised, 15, a.String()+": 5 used, raised to PerMinute(20)")
			if n := st.admitted(raised, 20); n != 15 {
				t.Fatalf("%v: %d more allowed after raising PerMinute(5) to PerMinute(20) with 5 used, want 15", a, n)
			}
		}
	}},
	// Lowering keeps what was used: the windows and Concurrency keep their
	// counts, so 3 of PerMinute(20) used leave 2 of PerMinute(5), and 12
	// leave none. GCRA keeps what the key owes as it stands, the moment its
	// bucket is full again (as GCRA/limit-lowered): 3 used of PerMinute(20)
	// owe 9s, under a quarter of PerMinute(5)'s 12s unit, leaving 4; 12 used
	// owe 36s, three of its units, leaving 2.
	{"LimitChange/lower-keeps-what-was-used", func(t *testing.T, st *storeTester) {
		for _, a := range changeAlgorithms {
			few, many := 2, 0
			if a == ratelimit.GCRA {
				few, many = 4, 2
			}
			req := withAlg(gcra("lower-"+a.String(), ratelimit.PerMinute(20), 1), a)
			st.use(req, 3)
			st.clock.Advance(ms)
			lowered := changed(req, ratelimit.PerMinute(5))
			st.wantRemaining(lowered, few, a.String()+": 3 used, lowered to PerMinute(5)")
			if n := st.admitted(lowered, 5); n != few {
				t.Fatalf("%v: %d more allowed after lowering PerMinute(20) to PerMinute(5) with 3 used, want %d", a, n, few)
			}
			over := withAlg(gcra("over-"+a.String(), ratelimit.PerMinute(20), 1), a)
			st.use(over, 12)
			if n := st.admitted(changed(over, ratelimit.PerMinute(5)), 5); n != many {
				t.Fatalf("%v: %d allowed after lowering to PerMinute(5) with 12 used, want %d", a, n, many)
			}
		}
	}},
	// GCRA refills between the takes and the change: 5 used of
	// PerMinute(5), 24s later 2 have refilled (one every 12s), so 3 are
	// used; under PerMinute(20) that leaves 17, then one every 3s.
	{"LimitChange/GCRA-raise-counts-what-refilled-at-the-old-rate", func(t *testing.T, st *storeTester) {
		req := gcra("refilled", ratelimit.PerMinute(5), 1)
		if n := st.admitted(req, 5); n != 5 {
			t.Fatalf("%d of PerMinute(5) allowed, want 5", n)
		}
		st.clock.Advance(24 * time.Second)
		raised := changed(req, ratelimit.PerMinute(20))
		st.take(raised, allowed(16, 12*time.Second)) // 4 used: 12s of debt at 3s each
		if n := st.admitted(raised, 20); n != 16 {
			t.Fatalf("%d more allowed, want 16", n)
		}
		st.clock.Advance(3 * time.Second)
		st.take(raised, allowed(0, time.Minute))
	}},
	// Long intervals too (a unit every 4.8h, then every 1.2h): all of
	// PerDay(5) used, raised to PerDay(20), 15 remain.
	{"LimitChange/GCRA-raise-of-a-daily-limit", func(t *testing.T, st *storeTester) {
		req := gcra("daily-gcra", ratelimit.PerDay(5), 1)
		st.use(req, 5)
		st.clock.Advance(ms)
		st.wantRemaining(changed(req, ratelimit.PerDay(20)), 15, "5 used of PerDay(5), raised to PerDay(20)")
	}},
	// A key whose requests come under two limits in turn (a rule whose
	// limit depends on the request) gets no more than the higher one
	// gives: the debt moves to the shorter interval once, and is then read
	// as it stands, never handed back and forth. At a frozen instant,
	// PerMinute(5) and PerMinute(20) in turn admit 20 in all, in units of
	// the higher limit, however long they alternate.
	{"LimitChange/GCRA-alternating-limits-admit-no-more-than-the-higher", func(t *testing.T, st *storeTester) {
		low := gcra("alternating", ratelimit.PerMinute(5), 1)
		high := changed(low, ratelimit.PerMinute(20))
		n := 0
		for range 50 {
			for _, req := range []stores.Request{low, high} {
				if st.admit(req) {
					n++
				}
			}
		}
		if n > 20 {
			t.Fatalf("%d admitted at one instant under PerMinute(5) and PerMinute(20) in turn, want at most 20", n)
		}
	}},
	// TakeAll reads a raised GCRA limit the same way, and a denied TakeAll
	// leaves what was used as it was: 5 used of PerMinute(5), a TakeAll of
	// 15 under PerMinute(20) beside a denied request consumes nothing, and
	// alone is allowed, leaving none.
	{"LimitChange/GCRA-TakeAll-raise", func(t *testing.T, st *storeTester) {
		req := gcra("batch", ratelimit.PerMinute(5), 1)
		st.use(req, 5)
		raised := changed(req, ratelimit.PerMinute(20))
		raised.Cost = 15
		full := gcra("batch", ratelimit.PerMinute(1), 1) // same client key, another rule: denied
		full.Rule = "other"
		st.use(full, 1)
		res := make([]ratelimit.Result, 2)
		if err := st.s.TakeAll(context.Background(), []stores.Request{raised, full}, res); err != nil {
			t.Fatal(err)
		}
		if !res[0].Allowed || res[0].Remaining != 15 || res[1].Allowed {
			t.Fatalf("TakeAll of 15 under the raised limit beside a denied request: %+v, want the first allowed as it stands (15 remaining), the second denied", res)
		}
		st.wantRemaining(raised, 15, "after the denied TakeAll")
		if err := st.s.TakeAll(context.Background(), []stores.Request{raised}, res[:1]); err != nil {
			t.Fatal(err)
		}
		if !res[0].Allowed || res[0].Remaining != 0 {
			t.Fatalf("TakeAll of 15 under PerMinute(20) with 5 used: %+v, want allowed with 0 remaining", res[0])
		}
	}},
	// Return and a settlement under a raised limit count in its units: 5
	// used of PerMinute(5), one PerMinute(20) unit given back leaves 4 used
	// (16 free), and a settlement of 16 fits exactly.
	{"LimitChange/GCRA-return-and-settle-under-a-raised-limit", func(t *testing.T, st *storeTester) {
		req := gcra("refund", ratelimit.PerMinute(5), 1)
		st.use(req, 5)
		raised := changed(req, ratelimit.PerMinute(20))
		st.release(raised, 0)
		st.wantRemaining(raised, 16, "5 used of PerMinute(5), one unit of PerMinute(20) returned")
		settle := raised
		settle.Force, settle.Cost = true, 16
		res, err := st.s.Take(context.Background(), settle)
		if err != nil || !res.Allowed || res.Remaining != 0 {
			t.Fatalf("settling 16 under PerMinute(20) with 4 used: %+v, %v; want fitted, 0 remaining", res, err)
		}
	}},
	// A quota (an explicit calendar window) counts what was used whatever
	// its size: raised from 5 to 20 a day with 5 used, 15 remain.
	{"LimitChange/quota-raise-gives-new-headroom-at-once", func(t *testing.T, st *storeTester) {
		w := dayWindow(st.clock.Now())
		if n := st.admitted(daily(5, w), 5); n != 5 {
			t.Fatalf("%d of a quota of 5 allowed, want 5", n)
		}
		if n := st.admitted(daily(20, w), 20); n != 15 {
			t.Fatalf("%d more allowed after raising the quota to 20, want 15", n)
		}
	}},
}

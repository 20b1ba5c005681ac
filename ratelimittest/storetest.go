package ratelimittest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// NewStoreFunc makes a fresh store that reads time from clock. TestStore
// calls it once per subtest.
type NewStoreFunc func(t *testing.T, clock ratelimit.Clock) ratelimit.Store

// TestStore runs the conformance suite for a ratelimit.Store: exact results
// of every algorithm on a fixed time grid, costs, invalid requests, key
// isolation, all-or-nothing TakeAll, refunds and concurrent use; bounds that
// hold when requests arrive out of order, the clock is stepped back or
// instances see calendar windows turn at different times; and Concurrency
// slots that expire one by one; a limit that changes for a key keeps
// what the key used (a raise gives its new headroom at once); and a
// SlidingLog exact in every trailing window. Every store in this module runs it; so
// should yours.
//
// The clock starts at Epoch, a boundary of every common window, and the
// suite moves it by whole milliseconds, so a store with microsecond or
// millisecond resolution gives the same results as one with nanoseconds.
func TestStore(t *testing.T, newStore NewStoreFunc) {
	cases := append(storeCases[:len(storeCases):len(storeCases)], exactCases...)
	for _, tc := range append(append(append(cases, shapeCases...), changeCases...), logCases...) {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(Epoch())
			s := newStore(t, clock)
			tc.run(t, &storeTester{t: t, s: s, clock: clock})
		})
	}
}

type storeTester struct {
	t     *testing.T
	s     ratelimit.Store
	clock *Clock
}

// take calls Take and checks the result against want (Limit is filled in;
// Slot is checked to be set exactly for an allowed take of non-zero cost)
// and returns the Slot.
func (st *storeTester) take(req stores.Request, want ratelimit.Result) uint64 {
	st.t.Helper()
	got, err := st.s.Take(context.Background(), req)
	if err != nil {
		st.t.Fatalf("Take(%s, cost %d) at +%v: %v", req.Key, req.Cost, st.elapsed(), err)
	}
	slot := got.Slot
	if holds := got.Allowed && req.Cost > 0; holds != (slot != 0) {
		st.t.Fatalf("Take(%s, %v, cost %d) at +%v: Slot %d; want a token exactly for an allowed take of non-zero cost", req.Key, req.Algorithm, req.Cost, st.elapsed(), slot)
	}
	got.Slot = 0
	got.NextAfter = 0 // optional: the RateLimit field derives it when a store leaves it zero
	want.Limit = req.Limit
	if got != want {
		st.t.Fatalf("Take(%s, cost %d) at +%v:\n got %+v\nwant %+v", req.Key, req.Cost, st.elapsed(), got, want)
	}
	return slot
}

// probe is the result of a cost-zero Take: the key's state, unchanged.
func (st *storeTester) probe(req stores.Request) ratelimit.Result {
	st.t.Helper()
	req.Cost, req.MaxDelay, req.Force, req.Slot = 0, 0, false, 0
	res, err := st.s.Take(context.Background(), req)
	if err != nil {
		st.t.Fatalf("Take(%s, cost 0) at +%v: %v", req.Key, st.elapsed(), err)
	}
	res.Slot = 0
	return res
}

// wantRemaining fails the test unless a probe of req finds want units
// remaining; after says what the test did before, for the message.
func (st *storeTester) wantRemaining(req stores.Request, want int, after string) {
	st.t.Helper()
	if got := st.probe(req).Remaining; got != want {
		st.t.Fatalf("%s: Remaining %d at +%v, want %d", after, got, st.elapsed(), want)
	}
}

func (st *storeTester) elapsed() time.Duration { return st.clock.Now().Sub(Epoch()) }

func allowed(remaining int, reset time.Duration) ratelimit.Result {
	return ratelimit.Result{Allowed: true, Remaining: remaining, ResetAfter: reset}
}

func denied(remaining int, retry, reset time.Duration) ratelimit.Result {
	return ratelimit.Result{Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

func gcra(key string, l ratelimit.Limit, cost int) stores.Request {
	return stores.Request{Rule: "conformance", Key: key, Limit: l, Cost: cost}
}

func windowed(w stores.Window) stores.Request {
	r := withAlg(gcra("k", ratelimit.PerDay(10), 1), ratelimit.FixedWindow)
	r.Window = w
	return r
}

func withAlg(r stores.Request, a ratelimit.Algorithm) stores.Request {
	r.Algorithm = a
	return r
}

const ms = time.Millisecond

var storeCases = []struct {
	name string
	run  func(t *testing.T, st *storeTester)
}{
	{"GCRA/burst-then-refill", func(t *testing.T, st *storeTester) {
		req := gcra("k", ratelimit.PerSecond(10), 1) // one unit every 100ms
		for i := 1; i <= 10; i++ {
			st.take(req, allowed(10-i, time.Duration(i)*100*ms))
		}
		st.take(req, denied(0, 100*ms, time.Second))
		st.clock.Advance(40 * ms)
		st.take(req, denied(0, 60*ms, 960*ms))
		st.clock.Advance(60 * ms)
		st.take(req, allowed(0, time.Second))
		st.clock.Advance(time.Second)
		st.take(req, allowed(9, 100*ms))
		st.clock.Advance(time.Hour)
		st.take(req, allowed(9, 100*ms))
	}},
	{"GCRA/burst-above-rate", func(t *testing.T, st *storeTester) {
		req := gcra("k", ratelimit.PerSecond(1).WithBurst(3), 1)
		st.take(req, allowed(2, 1*time.Second))
		st.take(req, allowed(1, 2*time.Second))
		st.take(req, allowed(0, 3*time.Second))
		st.take(req, denied(0, time.Second, 3*time.Second))
		st.clock.Advance(2500 * ms)
		st.take(req, allowed(1, 1500*ms))
	}},
	{"GCRA/cost", func(t *testing.T, st *storeTester) {
		req := gcra("k", ratelimit.PerMinute(60), 50) // one unit a second
		st.take(req, allowed(10, 50*time.Second))
		req.Cost = 20
		st.take(req, denied(10, 10*time.Second, 50*time.Second))
		req.Cost = 0
		st.take(req, allowed(10, 50*time.Second))
		req.Cost = 10
		st.take(req, allowed(0, 60*time.Second))
		req.Cost = 0
		st.take(req, denied(0, time.Second, 60*time.Second))
	}},
	{"GCRA/limit-lowered", func(t *testing.T, st *storeTester) {
		req := gcra("k", ratelimit.PerSecond(10), 5)
		st.take(req, allowed(5, 500*ms))
		// The plan changes to 2/s: the 500ms of debt is one of its two units.
		req.Limit, req.Cost = ratelimit.PerSecond(2), 1
		st.take(req, allowed(0, time.Second))
		st.take(req, denied(0, 500*ms, time.Second))
	}},
	{"SlidingWindow/weighted-previous-window", func(t *testing.T, st *storeTester) {
		req := withAlg(gcra("k", ratelimit.PerMinute(10), 1), ratelimit.SlidingWindow)
		for i := 1; i <= 10; i++ {
			st.take(req, allowed(10-i, 120*time.Second))
		}
		st.take(req, denied(0, 66*time.Second, 120*time.Second))
		// Next window: the previous 10 weigh 10*(60-e)/60, so one more fits
		// once that is at most 9, at e = 6s.
		st.clock.Advance(60 * time.Second)
		st.take(req, denied(0, 6*time.Second, 60*time.Second))
		st.clock.Advance(6 * time.Second)
		st.take(req, allowed(0, 114*time.Second))
		st.clock.Advance(24 * time.Second) // e = 30s: 10*30/60 = 5, plus 1
		st.take(req, allowed(3, 90*time.Second))
		st.clock.Advance(150 * time.Second) // two windows later: empty
		st.take(req, allowed(9, 120*time.Second))
	}},
	{"SlidingWindow/cost", func(t *testing.T, st *storeTester) {
		req := withAlg(gcra("k", ratelimit.PerMinute(100), 60), ratelimit.SlidingWindow)
		st.take(req, allowed(40, 120*time.Second))
		st.clock.Advance(90 * time.Second) // e = 30s: 60*30/60 = 30 weighted
		req.Cost = 80
		// 30+80 > 100: fits when 60*(60-e)/60 <= 20, at e = 40s.
		st.take(req, denied(70, 10*time.Second, 30*time.Second))
		req.Cost = 70
		st.take(req, allowed(0, 90*time.Second))
	}},
	{"FixedWindow/boundary", func(t *testing.T, st *storeTester) {
		req := withAlg(gcra("k", ratelimit.PerMinute(5), 1), ratelimit.FixedWindow)
		st.clock.Advance(30 * time.Second)
		for i := 1; i <= 5; i++ {
			st.take(req, allowed(5-i, 30*time.Second))
		}
		st.take(req, denied(0, 30*time.Second, 30*time.Second))
		st.clock.Advance(29999 * ms)
		st.take(req, denied(0, ms, ms))
		st.clock.Advance(ms) // the window turns: a full quota at once
		st.take(req, allowed(4, 60*time.Second))
		req.Cost = 0
		st.take(req, allowed(4, 60*time.Second))
	}},
	{"FixedWindow/explicit-window", func(t *testing.T, st *storeTester) {
		start := Epoch().Add(-6 * time.Hour) // a day starting 18:00 UTC the day before
		req := withAlg(gcra("k", ratelimit.PerDay(2), 1), ratelimit.FixedWindow)
		req.Window = stores.Window{Start: start.UnixNano(), End: start.Add(24 * time.Hour).UnixNano()}
		st.take(req, allowed(1, 18*time.Hour))
		st.take(req, allowed(0, 18*time.Hour))
		st.take(req, denied(0, 18*time.Hour, 18*time.Hour))
		st.clock.Advance(18 * time.Hour)
		req.Window = stores.Window{Start: req.Window.End, End: req.Window.End + int64(24*time.Hour)}
		st.take(req, allowed(1, 24*time.Hour))
	}},
	{"Concurrency/acquire-release-expire", func(t *testing.T, st *storeTester) {
		req := withAlg(gcra("k", ratelimit.Limit{Rate: 2, Period: time.Minute}, 1), ratelimit.Concurrency)
		st.take(req, allowed(1, time.Minute))
		st.take(req, allowed(0, time.Minute))
		st.take(req, denied(0, time.Second, time.Minute))
		if err := st.s.Return(context.Background(), req); err != nil {
			t.Fatalf("Return: %v", err)
		}
		st.clock.Advance(10 * time.Second)
		st.take(req, allowed(0, time.Minute))
		// Nobody returns: the slots expire a Period after the last acquisition.
		st.clock.Advance(time.Minute)
		st.take(req, allowed(1, time.Minute))
	}},
	{"Return/refund-capped-at-capacity", func(t *testing.T, st *storeTester) {
		req := gcra("k", ratelimit.PerSecond(10), 5)
		st.take(req, allowed(5, 500*ms))
		req.Cost = 2
		if err := st.s.Return(context.Background(), req); err != nil {
			t.Fatalf("Return: %v", err)
		}
		st.wantRemaining(req, 7, "after a refund of 2")
		req.Cost = 10
		if err := st.s.Return(context.Background(), req); err != nil {
			t.Fatalf("Return: %v", err)
		}
		st.wantRemaining(req, 10, "after a refund beyond the capacity (10)")
		for _, a := range []ratelimit.Algorithm{ratelimit.SlidingWindow, ratelimit.FixedWindow} {
			w := withAlg(gcra("w", ratelimit.PerMinute(10), 4), a)
			st.take(w, ratelimit.Result{Allowed: true, Remaining: 6, ResetAfter: map[ratelimit.Algorithm]time.Duration{ratelimit.SlidingWindow: 120 * time.Second, ratelimit.FixedWindow: 60 * time.Second}[a]})
			w.Cost = 3
			if err := st.s.Return(context.Background(), w); err != nil {
				t.Fatalf("Return(%v): %v", a, err)
			}
			st.wantRemaining(w, 9, a.String()+" after a refund")
		}
	}},
	{"Isolation/rule-key-algorithm", func(t *testing.T, st *storeTester) {
		l := ratelimit.PerMinute(1)
		base := gcra("k", l, 1)
		st.take(base, allowed(0, time.Minute))
		st.take(base, denied(0, time.Minute, time.Minute))
		other := base
		other.Rule = "conformance-2"
		st.take(other, allowed(0, time.Minute))
		other = base
		other.Key = "k2"
		st.take(other, allowed(0, time.Minute))
		st.take(withAlg(base, ratelimit.FixedWindow), allowed(0, time.Minute))
		st.take(withAlg(base, ratelimit.SlidingWindow), allowed(0, 2*time.Minute))
		long := strings.Repeat("x", 1<<20)
		big := gcra(long, l, 1)
		st.take(big, allowed(0, time.Minute))
		st.take(big, denied(0, time.Minute, time.Minute))
		st.take(gcra(long[:len(long)-1], l, 1), allowed(0, time.Minute))
	}},
	{"Invalid/requests", func(t *testing.T, st *storeTester) {
		bad := []struct {
			req  stores.Request
			want error
		}{
			{gcra("k", ratelimit.PerSecond(10), -1), ratelimit.ErrInvalidRequest},
			{gcra("k", ratelimit.PerSecond(10), 11), ratelimit.ErrInvalidRequest},
			{gcra("k", ratelimit.PerSecond(10), 1<<40), ratelimit.ErrInvalidRequest},
			{gcra("k", ratelimit.Limit{}, 1), ratelimit.ErrInvalidLimit},
			{gcra("k", ratelimit.PerSecond(-5), 1), ratelimit.ErrInvalidLimit},
			{gcra("k", ratelimit.Limit{Rate: 1, Period: -time.Second}, 1), ratelimit.ErrInvalidLimit},
			{gcra("k", ratelimit.PerSecond(2_000_000_000), 1), ratelimit.ErrInvalidLimit},
			{gcra("k", ratelimit.PerSecond(10).WithBurst(-1), 1), ratelimit.ErrInvalidLimit},
			{withAlg(gcra("k", ratelimit.PerSecond(10).WithBurst(20), 1), ratelimit.FixedWindow), ratelimit.ErrInvalidLimit},
			{withAlg(gcra("k", ratelimit.PerSecond(10), 1), 99), ratelimit.ErrInvalidRequest},
			{gcra("k", ratelimit.Limit{Rate: 1, Period: 60 * 365 * 24 * time.Hour}, 1), ratelimit.ErrInvalidLimit},
			{windowed(stores.Window{Start: -100, End: 0}), ratelimit.ErrInvalidRequest},
			{windowed(stores.Window{Start: 100, End: 100}), ratelimit.ErrInvalidRequest},
		}
		for _, b := range bad {
			res, err := st.s.Take(context.Background(), b.req)
			if !errors.Is(err, b.want) || res != (ratelimit.Result{}) {
				t.Errorf("Take(limit %v, cost %d, %v) = %+v, %v; want zero Result and %v", b.req.Limit, b.req.Cost, b.req.Algorithm, res, err, b.want)
			}
			if err := st.s.Return(context.Background(), b.req); !errors.Is(err, b.want) {
				t.Errorf("Return(limit %v, cost %d) = %v; want %v", b.req.Limit, b.req.Cost, err, b.want)
			}
		}
		reqs := []stores.Request{gcra("k", ratelimit.PerSecond(1), 1)}
		if err := st.s.TakeAll(context.Background(), reqs, make([]ratelimit.Result, 2)); !errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Errorf("TakeAll with mismatched results = %v; want ErrInvalidRequest", err)
		}
		reqs = append(reqs, bad[0].req)
		if err := st.s.TakeAll(context.Background(), reqs, make([]ratelimit.Result, 2)); !errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Errorf("TakeAll with an invalid request = %v; want ErrInvalidRequest", err)
		}
		if got := st.probe(reqs[0]).Remaining; got != 1 {
			t.Errorf("a rejected TakeAll consumed: remaining %d, want 1", got)
		}
	}},
	{"TakeAll/all-or-nothing", func(t *testing.T, st *storeTester) {
		wide := gcra("k", ratelimit.PerSecond(10), 1)
		wide.Rule = "wide"
		narrow := gcra("k", ratelimit.PerSecond(2), 1)
		narrow.Rule = "narrow"
		daily := withAlg(gcra("k", ratelimit.PerDay(100), 1), ratelimit.FixedWindow)
		daily.Rule = "daily"
		reqs := []stores.Request{wide, narrow, daily}
		res := make([]ratelimit.Result, 3)
		for i := 1; i <= 2; i++ {
			if err := st.s.TakeAll(context.Background(), reqs, res); err != nil {
				t.Fatal(err)
			}
			for j := range res {
				if !res[j].Allowed {
					t.Fatalf("TakeAll #%d: rule %d denied: %+v", i, j, res[j])
				}
			}
		}
		if err := st.s.TakeAll(context.Background(), reqs, res); err != nil {
			t.Fatal(err)
		}
		want := []ratelimit.Result{
			{Allowed: true, Limit: wide.Limit, Remaining: 8, ResetAfter: 200 * ms},
			{Limit: narrow.Limit, Remaining: 0, RetryAfter: 500 * ms, ResetAfter: time.Second},
			{Allowed: true, Limit: daily.Limit, Remaining: 98, ResetAfter: 24 * time.Hour},
		}
		for j := range want {
			got := res[j]
			got.NextAfter = 0 // optional, as in take
			if got != want[j] {
				t.Errorf("denied TakeAll, rule %d:\n got %+v\nwant %+v", j, got, want[j])
			}
		}
		if got := st.probe(wide).Remaining; got != 8 {
			t.Errorf("wide consumed while narrow denied: remaining %d, want 8", got)
		}
		if got := st.probe(daily).Remaining; got != 98 {
			t.Errorf("daily consumed while narrow denied: remaining %d, want 98", got)
		}
	}},
	{"TakeAll/same-key-twice", func(t *testing.T, st *storeTester) {
		a := gcra("k", ratelimit.PerSecond(3), 2)
		res := make([]ratelimit.Result, 2)
		if err := st.s.TakeAll(context.Background(), []stores.Request{a, a}, res); err != nil {
			t.Fatal(err)
		}
		if res[0].Allowed == res[1].Allowed || res[1].Allowed {
			t.Fatalf("3 units cannot hold 2+2: got %+v", res)
		}
		st.wantRemaining(a, 3, "after a denied TakeAll")
	}},
	{"Concurrent/exact-under-contention", func(t *testing.T, st *storeTester) {
		req := gcra("hot", ratelimit.PerHour(100), 1)
		ok, err := concurrentTakes(st, req, 20, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ok != 100 {
			t.Fatalf("200 concurrent takes on a capacity of 100 admitted %d", ok)
		}
	}},
}

package ratelimittest

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// reserve calls Take with MaxDelay and checks that it is allowed with delay.
func (st *storeTester) reserve(req stores.Request, delay time.Duration) ratelimit.Result {
	st.t.Helper()
	res, err := st.s.Take(context.Background(), req)
	if err != nil {
		st.t.Fatalf("Take(%s, max delay %v) at +%v: %v", req.Key, req.MaxDelay, st.elapsed(), err)
	}
	if !res.Allowed || res.Delay != delay {
		st.t.Fatalf("Take(%s, max delay %v) at +%v: %+v; want allowed with Delay %v", req.Key, req.MaxDelay, st.elapsed(), res, delay)
	}
	return res
}

// settle calls Take with Force and checks whether the units fitted.
func (st *storeTester) settle(req stores.Request, fits bool) ratelimit.Result {
	st.t.Helper()
	req.Force = true
	res, err := st.s.Take(context.Background(), req)
	if err != nil {
		st.t.Fatalf("forced Take(%s, %v, cost %d) at +%v: %v", req.Key, req.Algorithm, req.Cost, st.elapsed(), err)
	}
	if res.Allowed != fits {
		st.t.Fatalf("forced Take(%s, %v, cost %d) at +%v: %+v; want Allowed %v", req.Key, req.Algorithm, req.Cost, st.elapsed(), res, fits)
	}
	return res
}

// shapeCases are the pacing (Request.MaxDelay, Result.Delay) and
// settlement (Request.Force, Request.Slot on windows) cases of TestStore.
var shapeCases = []struct {
	name string
	run  func(t *testing.T, st *storeTester)
}{
	{"Pace/reservations-queue-behind-each-other", func(t *testing.T, st *storeTester) {
		req := gcra("k", ratelimit.PerSecond(10).WithBurst(1), 1) // one every 100ms
		req.MaxDelay = 250 * ms
		st.reserve(req, 0)
		st.reserve(req, 100*ms)
		r := st.reserve(req, 200*ms)
		if r.Remaining != 0 || r.ResetAfter != 300*ms {
			t.Fatalf("third reservation: %+v; want Remaining 0, ResetAfter 300ms", r)
		}
		// The fourth would wait 300ms: denied at once, consuming nothing,
		// with the delay it would have needed.
		st.take(req, denied(0, 300*ms, 300*ms))
		// Without MaxDelay nothing is reserved.
		plain := req
		plain.MaxDelay = 0
		st.take(plain, denied(0, 300*ms, 300*ms))
		// A reservation given back frees its place in the queue.
		st.release(req, 0)
		st.reserve(req, 200*ms)
		st.clock.Advance(150 * ms)
		st.reserve(req, 150*ms)
		if st.probe(req).ResetAfter != 250*ms {
			t.Fatalf("after the reservations: %+v; want ResetAfter 250ms", st.probe(req))
		}
	}},
	// A reservation given back while later ones wait leaves its turn empty:
	// handing it to a newcomer would put two requests on the turn of the
	// reservation behind it. Once the later ones are given back too, the
	// key's time moves back through it.
	{"Pace/middle-refund-keeps-later-turns", func(t *testing.T, st *storeTester) {
		req := gcra("k", ratelimit.PerSecond(10).WithBurst(1), 1)
		req.MaxDelay = time.Second
		st.reserve(req, 0)
		second := st.reserve(req, 100*ms)
		third := st.reserve(req, 200*ms)
		st.release(req, second.Slot)
		newcomer := st.reserve(req, 300*ms) // not +100ms: the third holds +200ms
		st.release(req, newcomer.Slot)
		st.release(req, third.Slot) // now the latest: back through the second's turn
		if got := st.probe(req).ResetAfter; got != 100*ms {
			t.Fatalf("after giving back every reservation but the first: ResetAfter %v, want 100ms", got)
		}
		st.reserve(req, 100*ms)
	}},
	// Once a reservation after a hole has been served, the hole is a lost
	// turn: giving its units back later would let the next request come
	// closer than the rate to the one served.
	{"Pace/hole-before-a-served-turn-is-lost", func(t *testing.T, st *storeTester) {
		req := gcra("k", ratelimit.PerSecond(10).WithBurst(1), 1)
		req.MaxDelay = time.Second
		st.reserve(req, 0)
		second := st.reserve(req, 100*ms)
		st.reserve(req, 200*ms)
		st.release(req, second.Slot)
		st.clock.Advance(250 * ms) // the third was served at +200ms
		later := st.reserve(req, 50*ms)
		st.release(req, later.Slot)
		if got := st.probe(req).ResetAfter; got != 50*ms {
			t.Fatalf("ResetAfter %v; want 50ms: the next turn is 100ms after the one served at +200ms", got)
		}
		st.reserve(req, 50*ms)
	}},
	{"Pace/windows-take-no-reservations", func(t *testing.T, st *storeTester) {
		for _, a := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow} {
			req := withAlg(gcra("w-"+a.String(), ratelimit.PerMinute(1), 1), a)
			req.MaxDelay = time.Hour
			if res := st.probe(req); !res.Allowed {
				t.Fatalf("%v: fresh key denied: %+v", a, res)
			}
			if !st.admit(req) || st.admit(req) {
				t.Fatalf("%v with MaxDelay: want one admission and a denial, as without", a)
			}
		}
	}},
	{"Pace/cancelled-reservations-leave-no-trace", func(t *testing.T, st *storeTester) {
		cancelledReservations(t, st, 10_000)
	}},
	{"Settle/forced-charge-postpones-gcra", func(t *testing.T, st *storeTester) {
		req := gcra("k", ratelimit.PerSecond(10), 1) // capacity 10, one every 100ms
		st.take(req, allowed(9, 100*ms))
		// The handler reported 10 units more than its estimate of 1.
		req.Cost = 10
		if res := st.settle(req, false); res.Remaining != 0 || res.ResetAfter != 1100*ms || res.RetryAfter != 200*ms {
			t.Fatalf("forced Take of 10 over 1: %+v; want Remaining 0, ResetAfter 1.1s, RetryAfter 200ms", res)
		}
		req.Cost = 1
		st.take(req, denied(0, 200*ms, 1100*ms))
		st.clock.Advance(200 * ms)
		st.take(req, allowed(0, time.Second))
		// Above the capacity is valid for a settlement only.
		req.Cost = 25
		st.settle(req, false)
		req.Force = false
		if _, err := st.s.Take(context.Background(), req); !errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Fatalf("unforced Take above the capacity: %v; want ErrInvalidRequest", err)
		}
	}},
	{"Settle/fixed-window-of-the-reservation", func(t *testing.T, st *storeTester) {
		req := withAlg(gcra("k", ratelimit.PerMinute(10), 5), ratelimit.FixedWindow)
		first := st.take(req, allowed(5, time.Minute))
		st.clock.Advance(30 * time.Second)
		st.release(withCost(req, 3), first)
		st.wantRemaining(req, 8, "after returning 3 of 5 to the window")
		st.settle(slotted(withCost(req, 4), first), true)
		st.wantRemaining(req, 4, "after settling 4 more")
		st.clock.Advance(40 * time.Second) // the first window ended at +60s
		st.take(req, allowed(5, 50*time.Second))
		st.release(withCost(req, 5), first)
		st.settle(slotted(withCost(req, 9), first), true)
		st.wantRemaining(req, 5, "after settlements of an ended window (they must not change the current one)")
	}},
	{"Settle/sliding-window-of-the-reservation", func(t *testing.T, st *storeTester) {
		req := withAlg(gcra("k", ratelimit.PerMinute(10), 5), ratelimit.SlidingWindow)
		first := st.take(req, allowed(5, 2*time.Minute))
		st.clock.Advance(70 * time.Second) // that window is now the previous one
		st.wantRemaining(req, 5, "70s after the reservation, its 5 weighted by 50/60, rounded up")
		st.release(withCost(req, 5), first)
		st.wantRemaining(req, 10, "after returning the previous window's 5")
		st.settle(slotted(withCost(req, 3), first), true)
		st.wantRemaining(req, 7, "after settling 3 into the previous window")
		st.clock.Advance(time.Minute) // two windows later it no longer counts
		st.settle(slotted(withCost(req, 9), first), true)
		st.wantRemaining(req, 10, "after a settlement two windows late (it must not count)")
	}},
	{"Settle/take-all-refuses-forced-requests", func(t *testing.T, st *storeTester) {
		reqs := []stores.Request{gcra("a", ratelimit.PerSecond(10), 1), gcra("b", ratelimit.PerSecond(10), 1)}
		reqs[1].Force = true
		err := st.s.TakeAll(context.Background(), reqs, make([]ratelimit.Result, 2))
		if !errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Fatalf("TakeAll with a forced request: %v; want ErrInvalidRequest", err)
		}
		st.wantRemaining(reqs[0], 10, "after a refused TakeAll (it must consume nothing)")
	}},
}

func withCost(r stores.Request, cost int) stores.Request {
	r.Cost = cost
	return r
}

// slotted is r applied to what the Take that returned slot consumed.
func slotted(r stores.Request, slot uint64) stores.Request {
	r.Slot = slot
	return r
}

// cancelledReservations makes n reservations on one key, in rounds, and
// gives each back, with its Slot, in random order at a random moment before
// it would act; a second key gets the same other traffic and no
// reservation. Between rounds, with no reservation outstanding, the two
// keys must be in the same state: cancelled reservations leave no trace,
// whatever the order they are given back in.
func cancelledReservations(t *testing.T, st *storeTester, n int) {
	rng := rand.New(rand.NewPCG(19, 23))
	lim := ratelimit.PerSecond(50).WithBurst(5) // one every 20ms
	subject, control := gcra("subject", lim, 1), gcra("control", lim, 1)
	subject.MaxDelay = time.Second
	type reservation struct {
		cost int
		acts time.Time
		slot uint64
	}
	// advanceBefore moves the clock forward by whole milliseconds, staying
	// before the moment the first outstanding reservation acts.
	advanceBefore := func(out []reservation) {
		room := time.Duration(1<<62 - 1)
		for _, r := range out {
			room = min(room, r.acts.Sub(st.clock.Now()))
		}
		if room > ms {
			st.clock.Advance(time.Duration(rng.Int64N(int64(room/ms))) * ms)
		}
	}
	for made, round := 0, 0; made < n; round++ {
		for range rng.IntN(4) { // other traffic, the same on both keys
			cost := rng.IntN(3)
			other := withCost(subject, cost)
			other.MaxDelay = 0
			if a, b := st.admit(other), st.admit(withCost(control, cost)); a != b {
				t.Fatalf("round %d: the keys decided differently on other traffic (%v, %v)", round, a, b)
			}
		}
		var out []reservation
		for range 1 + rng.IntN(min(20, n-made)) {
			req := withCost(subject, 1+rng.IntN(2))
			res, err := st.s.Take(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			made++
			if res.Allowed {
				out = append(out, reservation{req.Cost, st.clock.Now().Add(res.Delay), res.Slot})
			}
			advanceBefore(out)
		}
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		for len(out) > 0 {
			advanceBefore(out)
			st.release(withCost(subject, out[0].cost), out[0].slot)
			out = out[1:]
		}
		if a, b := st.probe(subject), st.probe(control); a != b {
			t.Fatalf("round %d, %d reservations made and cancelled: state %+v, without them %+v", round, made, a, b)
		}
		st.clock.Advance(time.Duration(rng.IntN(300)) * ms)
	}
}

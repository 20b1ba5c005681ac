package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// entry is one (rule, key, algorithm) of a differential run, with a fixed limit.
type entry struct {
	req stores.Request
	// exact: every division the algorithm makes is exact in microseconds,
	// so Results equal the memory store's to the nanosecond. Otherwise a
	// sliding window's RetryAfter is the memory store's rounded up to the µs.
	exact bool
	// explicit FixedWindow bounds: windows of Period starting at offset.
	explicit bool
	offset   time.Duration
	// The Slot of the entry's last allowed window take, in each store.
	memSlot, redisSlot uint64
	// held are GCRA takes not given back yet, with their tokens in each
	// store: the returns give them back in random order.
	held []heldTake
}

func randomEntry(rng *rand.Rand, i int) entry {
	keys := []string{"k0", "k1{x}", "}k2", "%k3", "", "{k5}"}
	e := entry{exact: true}
	e.req.Rule = fmt.Sprintf("rule%d", rng.IntN(2))
	e.req.Key = keys[i%len(keys)] + fmt.Sprint(i/len(keys))
	ms := time.Millisecond
	switch e.req.Algorithm = ratelimit.Algorithm(rng.IntN(5)); e.req.Algorithm {
	case ratelimit.GCRA:
		rate := 1 + rng.IntN(20)
		interval := time.Duration(1+rng.IntN(300_000)) * time.Microsecond // whole µs
		e.req.Limit = stores.Limit{Rate: rate, Period: time.Duration(rate) * interval}
		if rng.IntN(2) == 0 {
			e.req.Limit.Burst = 1 + rng.IntN(2*rate+5)
		}
	case stores.SlidingWindow:
		if rng.IntN(3) > 0 {
			// 27,720 = lcm(1..12): every count divides the period.
			e.req.Limit = stores.Limit{Rate: 1 + rng.IntN(12), Period: time.Duration(1+rng.IntN(40)) * 27720 * time.Microsecond}
		} else {
			e.exact = false
			e.req.Limit = stores.Limit{Rate: 1 + rng.IntN(1000), Period: time.Duration(1+rng.IntN(5000)) * ms}
		}
	case stores.FixedWindow:
		e.req.Limit = stores.Limit{Rate: 1 + rng.IntN(20), Period: time.Duration(1+rng.IntN(3000)) * ms}
		if rng.IntN(3) == 0 {
			e.explicit = true
			e.offset = time.Duration(rng.IntN(int(e.req.Limit.Period/ms))) * ms
		}
	case ratelimit.Concurrency:
		e.req.Limit = ratelimit.Limit{Rate: 1 + rng.IntN(10), Period: time.Duration(10+rng.IntN(5000)) * ms}
	case ratelimit.SlidingLog:
		e.req.Limit = ratelimit.Limit{Rate: 1 + rng.IntN(20), Period: time.Duration(1+rng.IntN(3000)) * ms}
	}
	return e
}

// at returns the entry's request with cost at time now.
func (e *entry) at(now time.Time, cost int) stores.Request {
	r := e.req
	r.Cost = cost
	if e.explicit {
		p := int64(r.Limit.Period)
		rel := now.UnixNano() - int64(e.offset)
		start := rel - ((rel%p)+p)%p + int64(e.offset)
		r.Window = stores.Window{Start: start, End: start + p}
	}
	return r
}

// shape makes req, sometimes, a reservation (GCRA: a MaxDelay up to two
// periods), a settlement (Force, any algorithm but Concurrency, with a
// cost up to twice the capacity), and for a settlement or a return (take
// false) of a window the one of the entry's last allowed take. A GCRA
// return gives back, two times in three, a random take the entry holds,
// with its cost and tokens (holes when later reservations wait). It
// returns the request for the memory store and for this one, which differ
// in Slot.
func (e *entry) shape(rng *rand.Rand, req stores.Request, take bool) (mreq, rreq stores.Request) {
	alg := req.Algorithm
	if take && alg == stores.GCRA && rng.IntN(3) == 0 {
		req.MaxDelay = time.Duration(rng.Int64N(2*int64(req.Limit.Period)/1e6+1)) * time.Millisecond
	}
	if take && alg != stores.Concurrency && rng.IntN(6) == 0 {
		req.Force, req.Cost = true, rng.IntN(2*req.Limit.Capacity()+2)
	}
	mreq, rreq = req, req
	window := alg == ratelimit.FixedWindow || alg == ratelimit.SlidingWindow || alg == ratelimit.SlidingLog
	if window && (req.Force || !take) && e.memSlot != 0 && rng.IntN(2) == 0 {
		mreq.Slot, rreq.Slot = e.memSlot, e.redisSlot
	}
	if alg == stores.GCRA && !take && len(e.held) > 0 && rng.IntN(3) > 0 {
		i := rng.IntN(len(e.held))
		h := e.held[i]
		e.held = append(e.held[:i], e.held[i+1:]...)
		mreq.Cost, rreq.Cost = h.cost, h.cost
		mreq.Slot, rreq.Slot = h.mem, h.redis
	}
	return mreq, rreq
}

// keepSlot remembers the Slots of an allowed window take, and the takes
// of cost GCRA units (reservations, forced or plain; at most the capacity,
// as a Return) with their tokens.
func (e *entry) keepSlot(cost int, got, want stores.Result) {
	switch {
	case want.Slot == 0:
	case e.req.Algorithm == stores.GCRA:
		if cost > e.req.Limit.Capacity() { // a settlement beyond a Return's bound
			return
		}
		if len(e.held) == maxHeld {
			e.held = e.held[1:]
		}
		e.held = append(e.held, heldTake{cost, want.Slot, got.Slot})
	case e.req.Algorithm != stores.Concurrency:
		e.memSlot, e.redisSlot = want.Slot, got.Slot
	}
}

func randomCost(rng *rand.Rand, capacity int) int {
	if rng.IntN(4) == 0 {
		return rng.IntN(capacity + 1)
	}
	return rng.IntN(min(capacity, 3) + 1)
}

func ceilMicro(d time.Duration) time.Duration {
	if r := d % time.Microsecond; r > 0 {
		return d - r + time.Microsecond
	}
	return d
}

// sameResult compares a Result of this store with the memory store's. Slot
// tokens are each store's own: both must be present or absent together; a
// window's is its end and a GCRA take's the key's time after it, in µs
// here and in ns in the memory store. An allowed sliding-window take that
// was not forced reports its NextAfter, in µs.
func sameResult(e *entry, forced bool, got, want stores.Result) bool {
	if !e.exact {
		want.RetryAfter = ceilMicro(want.RetryAfter)
	}
	if !sameSlot(e.req.Algorithm, got.Slot, want.Slot) {
		return false
	}
	got.Slot, want.Slot = 0, 0
	if (e.req.Algorithm == ratelimit.SlidingWindow || e.req.Algorithm == ratelimit.SlidingLog) && want.Allowed && !forced {
		want.NextAfter = ceilMicro(want.NextAfter) // in µs here
	} else {
		want.NextAfter = 0 // reported for allowed sliding-window takes alone
	}
	return got == want
}

// sameSlot reports whether this store's Slot got matches the memory
// store's want.
func sameSlot(alg stores.Algorithm, got, want uint64) bool {
	switch alg {
	case ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.GCRA, ratelimit.SlidingLog:
		return int64(got)*1000 == int64(want)
	}
	return (got == 0) == (want == 0)
}

// TestDifferential runs random timelines against this store and the memory
// store and requires the same Results: Take, TakeAll (across Cluster slots
// too) and Return, every algorithm, random costs and limits, on a
// millisecond grid.
func TestDifferential(t *testing.T) {
	seeds := map[string]int{"standalone": 8, "cluster": 5, "ring": 3}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			client := b.client(t)
			for seed := range seeds[b.name] {
				t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(seed), 42))
					clock := ratelimittest.NewClock(ratelimittest.Epoch().Add(time.Duration(rng.IntN(1e6)) * time.Millisecond))
					mem := memory.New(memory.WithClock(clock))
					rs := newStore(client, WithClock(clock), WithPrefix(uniquePrefix(t)))
					runDifferential(t, rng, clock, mem, rs, b.name == "standalone", 400)
				})
			}
		})
	}
}

func runDifferential(t *testing.T, rng *rand.Rand, clock *ratelimittest.Clock, mem, rs stores.Store, singleNode bool, ops int) {
	ctx := context.Background()
	entries := make([]entry, 8)
	for i := range entries {
		entries[i] = randomEntry(rng, i)
	}
	var log []string
	var allowed, denied, refunds, tokened, batches, shaped int
	defer func() {
		t.Logf("%d ops: %d allowed, %d denied, %d refunds (%d GCRA with a token), %d TakeAll, %d reservations or settlements", ops, allowed, denied, refunds, tokened, batches, shaped)
	}()
	count := func(r stores.Result) {
		if r.Allowed {
			allowed++
		} else {
			denied++
		}
	}
	fail := func(format string, args ...any) {
		t.Helper()
		start := max(0, len(log)-15)
		for _, l := range log[start:] {
			t.Log(l)
		}
		t.Fatalf(format, args...)
	}
	for op := range ops {
		e := &entries[rng.IntN(len(entries))]
		switch rng.IntN(10) {
		case 0, 1, 2, 3:
			clock.Advance(time.Duration(rng.Int64N(int64(e.req.Limit.Period)/5e6+1)+1) * time.Millisecond)
		case 4:
			clock.Advance(time.Duration(rng.Int64N(int64(e.req.Limit.Period)*2/1e6)+1) * time.Millisecond)
		}
		now := clock.Now()
		switch k := rng.IntN(20); {
		case k < 11:
			req, rreq := e.shape(rng, e.at(now, randomCost(rng, e.req.Limit.Capacity())), true)
			want, err1 := mem.Take(ctx, req)
			got, err2 := rs.Take(ctx, rreq)
			log = append(log, fmt.Sprintf("#%d +%v Take %s/%q %v %v cost %d max delay %v force %v slot %d: %+v", op, now.Sub(ratelimittest.Epoch()), req.Rule, req.Key, req.Algorithm, req.Limit, req.Cost, req.MaxDelay, req.Force, req.Slot, want))
			if err1 != nil || err2 != nil {
				fail("Take errors: memory %v, redis %v", err1, err2)
			}
			count(want)
			if req.MaxDelay > 0 || req.Force {
				shaped++
			}
			if req.Force && req.Algorithm == stores.SlidingWindow {
				e.exact = false // a count above Rate need not divide the period
			}
			if !sameResult(e, req.Force, got, want) {
				fail("op %d Take(%s/%q %v %v cost %d max delay %v force %v):\n redis  %+v\n memory %+v", op, req.Rule, req.Key, req.Algorithm, req.Limit, req.Cost, req.MaxDelay, req.Force, got, want)
			}
			e.keepSlot(req.Cost, got, want)
		case k < 16:
			n := 1 + rng.IntN(4)
			reqs := make([]stores.Request, 0, n)
			var es []*entry
			for range n {
				x := &entries[rng.IntN(len(entries))]
				if !singleNode && x.req.Algorithm == stores.Concurrency {
					continue // a compensated acquisition keeps its later expiry: documented
				}
				r := x.at(now, randomCost(rng, x.req.Limit.Capacity()))
				if r.Algorithm == stores.GCRA && rng.IntN(3) == 0 {
					r.MaxDelay = time.Duration(rng.Int64N(2*int64(r.Limit.Period)/1e6+1)) * time.Millisecond
				}
				reqs = append(reqs, r)
				es = append(es, x)
			}
			want := make([]stores.Result, len(reqs))
			got := make([]stores.Result, len(reqs))
			err1 := mem.TakeAll(ctx, reqs, want)
			err2 := rs.TakeAll(ctx, reqs, got)
			log = append(log, fmt.Sprintf("#%d +%v TakeAll %d: %+v", op, now.Sub(ratelimittest.Epoch()), len(reqs), want))
			if err1 != nil || err2 != nil {
				fail("TakeAll errors: memory %v, redis %v", err1, err2)
			}
			batches++
			for i := range reqs {
				count(want[i])
				if !sameResult(es[i], reqs[i].Force, got[i], want[i]) {
					fail("op %d TakeAll request %d of %d (%s/%q %v %v cost %d):\n redis  %+v\n memory %+v", op, i, len(reqs), reqs[i].Rule, reqs[i].Key, reqs[i].Algorithm, reqs[i].Limit, reqs[i].Cost, got[i], want[i])
				}
			}
			for i := range reqs { // a denied TakeAll reports no Slot
				es[i].keepSlot(reqs[i].Cost, got[i], want[i])
			}
		default:
			req, rreq := e.shape(rng, e.at(now, randomCost(rng, e.req.Limit.Capacity())), false)
			log = append(log, fmt.Sprintf("#%d +%v Return %s/%q %v cost %d slot %d", op, now.Sub(ratelimittest.Epoch()), req.Rule, req.Key, req.Algorithm, req.Cost, req.Slot))
			refunds++
			if req.Slot != 0 && req.Algorithm == stores.GCRA {
				tokened++
			}
			err1 := mem.Return(ctx, req)
			err2 := rs.Return(ctx, rreq)
			if err1 != nil || err2 != nil {
				fail("Return errors: memory %v, redis %v", err1, err2)
			}
		}
	}
}

// TestLargeSlidingWindow checks the sliding window where prev*(P-e)
// exceeds 2^53: a PerDay(1,000,000) window and a century of 2^31-1 events,
// against the memory store's 128-bit arithmetic.
func TestLargeSlidingWindow(t *testing.T) {
	ctx := context.Background()
	client := standaloneClient(t)
	limits := []stores.Limit{
		ratelimit.PerDay(1_000_000),
		ratelimit.PerDay(999_983), // a prime count: divisions are not exact
		{Rate: 1<<31 - 1, Period: 50 * 365 * 24 * time.Hour},
	}
	for _, l := range limits {
		t.Run(l.String(), func(t *testing.T) {
			clock := ratelimittest.NewClock(time.Time{})
			mem := memory.New(memory.WithClock(clock))
			rs := newStore(client, WithClock(clock), WithPrefix(uniquePrefix(t)))
			e := &entry{req: withAlg(gcraReq("big", l, 0), stores.SlidingWindow)}
			rng := rand.New(rand.NewPCG(7, uint64(l.Rate)))
			check := func(cost int) {
				t.Helper()
				req := e.at(clock.Now(), cost)
				want, _ := mem.Take(ctx, req)
				got, err := rs.Take(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if !sameResult(e, req.Force, got, want) {
					t.Fatalf("at +%v cost %d:\n redis  %+v\n memory %+v", clock.Now().Sub(ratelimittest.Epoch()), cost, got, want)
				}
			}
			// Jump to a window start, fill most of it, then probe the next
			// windows at random offsets with random costs.
			p := l.Period
			now := clock.Now().UnixNano()
			clock.Advance(time.Duration(int64(p) - now%int64(p)))
			check(l.Rate - rng.IntN(l.Rate/10))
			for range 60 {
				clock.Advance(time.Duration(rng.Int64N(int64(p)/(20*int64(time.Millisecond)))+1) * time.Millisecond)
				check(rng.IntN(l.Rate/3 + 1))
			}
		})
	}
}

// TestDifferentialLoweredLimit lowers a limit below the usage already
// stored, for every algorithm (and a FixedWindow whose explicit window has
// ended): Remaining is never negative and waits never either, and the
// Results equal the memory store's.
func TestDifferentialLoweredLimit(t *testing.T) {
	ctx := context.Background()
	client := standaloneClient(t)
	for alg := ratelimit.GCRA; alg <= ratelimit.SlidingLog; alg++ {
		for _, ended := range []bool{false, true} {
			if ended && alg != stores.FixedWindow {
				continue
			}
			name := alg.String()
			if ended {
				name += "/window-ended"
			}
			t.Run(name, func(t *testing.T) {
				clock := ratelimittest.NewClock(ratelimittest.Epoch())
				mem := memory.New(memory.WithClock(clock))
				rs := newStore(client, WithClock(clock), WithPrefix(uniquePrefix(t)))
				high := stores.Limit{Rate: 10, Period: time.Minute}
				low := stores.Limit{Rate: 3, Period: time.Minute}
				req := withAlg(gcraReq("lowered", high, 8), alg)
				if ended {
					end := clock.Now().Add(-time.Second)
					req.Window = stores.Window{Start: end.Add(-time.Minute).UnixNano(), End: end.UnixNano()}
				}
				step := func(what string, r stores.Request) {
					t.Helper()
					want, err1 := mem.Take(ctx, r)
					got, err2 := rs.Take(ctx, r)
					if err1 != nil || err2 != nil {
						t.Fatalf("%s: errors memory %v, redis %v", what, err1, err2)
					}
					if alg == stores.SlidingWindow {
						want.RetryAfter = ceilMicro(want.RetryAfter) // documented µs rounding
					}
					if !sameResult(&entry{exact: true, req: r}, r.Force, got, want) {
						t.Fatalf("%s:\n redis  %+v\n memory %+v", what, got, want)
					}
					if got.Remaining < 0 || got.RetryAfter < 0 || got.ResetAfter < 0 {
						t.Fatalf("%s: negative field in %+v", what, got)
					}
				}
				step("take 8 of 10", req)
				req.Limit = low
				for cost := range 4 {
					req.Cost = cost
					step(fmt.Sprintf("cost %d of lowered limit 3", cost), req)
					step(fmt.Sprintf("cost %d again (denied cache)", cost), req)
				}
				clock.Advance(10 * time.Second)
				req.Cost = 1
				step("cost 1 after 10s", req)
				if err1, err2 := mem.Return(ctx, req), rs.Return(ctx, req); err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				step("cost 1 after a Return", req)
				clock.Advance(50 * time.Second)
				step("cost 1 after a minute", req)
			})
		}
	}
}

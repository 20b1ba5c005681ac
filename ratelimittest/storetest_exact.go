package ratelimittest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

// admit calls Take and reports whether it was allowed.
func (st *storeTester) admit(req stores.Request) bool {
	st.t.Helper()
	res, err := st.s.Take(context.Background(), req)
	if err != nil {
		st.t.Fatalf("Take(%s, %v) at +%v: %v", req.Key, req.Algorithm, st.elapsed(), err)
	}
	return res.Allowed
}

func (st *storeTester) release(req stores.Request, slot uint64) {
	st.t.Helper()
	req.Slot = slot
	if err := st.s.Return(context.Background(), req); err != nil {
		st.t.Fatalf("Return(%s, slot %d) at +%v: %v", req.Key, slot, st.elapsed(), err)
	}
}

// bounded are the algorithms with a per-window bound: PerMinute(10) allows
// 10 per window (GCRA: 10 at once, then one every 6s).
var bounded = []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.SlidingLog}

// dayWindow is the explicit window of the UTC day containing t, with its
// neighbours, as a Quota rule would send it.
func dayWindow(t time.Time) stores.Window {
	start := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return stores.Window{
		Start: start.UnixNano(), End: start.AddDate(0, 0, 1).UnixNano(),
		PrevStart: start.AddDate(0, 0, -1).UnixNano(), NextEnd: start.AddDate(0, 0, 2).UnixNano(),
	}
}

func daily(n int, w stores.Window) stores.Request {
	r := withAlg(gcra("daily", ratelimit.Limit{Rate: n, Period: time.Duration(w.End - w.Start)}, 1), ratelimit.FixedWindow)
	r.Window = w
	return r
}

var exactCases = []struct {
	name string
	run  func(t *testing.T, st *storeTester)
}{
	// A wall clock stepped back (an NTP step, a restored VM) must not give a
	// key that used its limit a new one: time never goes back for a key.
	{"ClockSteppedBack/never-admits-more", func(t *testing.T, st *storeTester) {
		for _, step := range []time.Duration{time.Second, time.Minute, time.Hour} {
			for _, a := range bounded {
				st.clock.Set(Epoch().Add(30 * time.Second))
				req := withAlg(gcra(fmt.Sprintf("%v-%v", a, step), ratelimit.PerMinute(10), 1), a)
				for i := 0; i < 10; i++ {
					if !st.admit(req) {
						t.Fatalf("%v: request %d of 10 denied on a fresh key", a, i+1)
					}
				}
				st.clock.Advance(-step)
				for i := 0; i < 100; i++ {
					if st.admit(req) {
						t.Fatalf("%v: clock stepped back %v: request %d admitted past the 10 already used", a, step, i+1)
					}
				}
				// Once the clock is past the used window again, the key is usable.
				st.clock.Set(Epoch().Add(3 * time.Minute))
				if !st.admit(req) {
					t.Fatalf("%v: still denied two windows after the clock caught up", a)
				}
			}
		}
	}},
	{"ClockSteppedBack/calendar-quota", func(t *testing.T, st *storeTester) {
		for _, step := range []time.Duration{time.Second, time.Minute, time.Hour} {
			st.clock.Set(Epoch().Add(24*time.Hour + 30*time.Minute))
			req := daily(10, dayWindow(st.clock.Now()))
			req.Key = "step-" + step.String()
			for i := 0; i < 10; i++ {
				if !st.admit(req) {
					t.Fatalf("request %d of 10 denied", i+1)
				}
			}
			req.Window = dayWindow(st.clock.Advance(-step)) // the day before, for the 1h step
			for i := 0; i < 100; i++ {
				if st.admit(req) {
					t.Fatalf("clock stepped back %v: request %d admitted past the day's 10", step, i+1)
				}
			}
		}
	}},
	// Requests stamped a millisecond either side of a boundary, alternating,
	// as goroutines that read the clock before queueing on a hot key arrive.
	// Those stamped in the later window count in it (or a later one), so at
	// most 10 of them are admitted, and at most 20 in all.
	{"OutOfOrder/alternating-across-boundary", func(t *testing.T, st *storeTester) {
		boundary := Epoch().Add(time.Minute)
		for _, a := range bounded {
			req := withAlg(gcra("alt-"+a.String(), ratelimit.PerMinute(10), 1), a)
			late, all := 0, 0
			for i := 0; i < 100; i++ {
				at := boundary.Add(-ms)
				if i%2 == 1 {
					at = boundary.Add(ms)
				}
				st.clock.Set(at)
				if st.admit(req) {
					all++
					if i%2 == 1 {
						late++
					}
				}
			}
			if late > 10 || all > 20 {
				t.Errorf("%v: admitted %d (%d stamped after the boundary) of 100 alternating requests under 10 per minute", a, all, late)
			}
		}
	}},
	// 64 goroutines on one key, each setting the shared clock a millisecond
	// either side of a boundary before its request: arrivals out of order.
	// Whatever the order, the key's two windows hold at most 10 each.
	{"OutOfOrder/64-goroutines-one-key", func(t *testing.T, st *storeTester) {
		boundary := Epoch().Add(time.Minute)
		for _, a := range bounded {
			req := withAlg(gcra("hot-"+a.String(), ratelimit.PerMinute(10), 1), a)
			n, err := concurrentTakes(st, req, 64, 8, func(g, i int) {
				st.clock.Set(boundary.Add(time.Duration(1-2*((g+i)%2)) * ms))
			})
			if err != nil {
				t.Fatal(err)
			}
			// Two windows of 10; GCRA: 10 at once plus what 2ms refill (none).
			if n > 20 {
				t.Errorf("%v: 512 requests around one boundary admitted %d; the two windows hold 20", a, n)
			}
		}
	}},
	// Two instances share Daily(10) through this store; one's clock is
	// behind, so around midnight it still sends yesterday's window while
	// the other sends today's. Only the requests before today's first one
	// may count in yesterday: at most 10+1 in all.
	{"SkewedInstances/daily-quota", func(t *testing.T, st *storeTester) {
		for _, skew := range []time.Duration{100 * ms, 2 * time.Second} {
			midnight := Epoch().Add(24 * time.Hour)
			st.clock.Set(midnight.Add(skew / 2))
			behind, ahead := midnight.Add(-skew/2), midnight.Add(skew/2)
			all := 0
			for i := 0; i < 100; i++ {
				at := behind
				if i%2 == 1 {
					at = ahead
				}
				req := daily(10, dayWindow(at))
				req.Key = "skew-" + skew.String()
				if st.admit(req) {
					all++
				}
			}
			if all > 11 {
				t.Errorf("skew %v: Daily(10) shared by two instances admitted %d of 100 around midnight", skew, all)
			}
		}
	}},
	// A slot whose holder never returns it (a timed-out acquisition, a
	// failed release) expires a Period after it was taken, while other
	// acquisitions on the key go on.
	{"Concurrency/lost-slot-expires-under-traffic", func(t *testing.T, st *storeTester) {
		req := withAlg(gcra("k", ratelimit.Limit{Rate: 3, Period: time.Minute}, 2), ratelimit.Concurrency)
		st.take(req, allowed(1, time.Minute)) // lost: never returned
		req.Cost = 1
		for i := 1; i <= 12; i++ {
			st.clock.Advance(10 * time.Second)
			remaining := 0 // the lost slots hold 2 of 3
			if i >= 6 {
				remaining = 2 // they expired at +60s
			}
			st.release(req, st.take(req, allowed(remaining, time.Minute)))
		}
	}},
	{"Concurrency/expired-token-releases-nothing-else", func(t *testing.T, st *storeTester) {
		req := withAlg(gcra("k", ratelimit.Limit{Rate: 2, Period: time.Minute}, 1), ratelimit.Concurrency)
		a := st.take(req, allowed(1, time.Minute))
		st.clock.Advance(30 * time.Second)
		b := st.take(req, allowed(0, time.Minute))
		st.clock.Advance(40 * time.Second) // a expired at +60s
		c := st.take(req, allowed(0, time.Minute))
		if a == b || b == c || a == c {
			t.Fatalf("slot tokens %d, %d, %d are not unique", a, b, c)
		}
		st.release(req, a)
		st.wantRemaining(req, 0, "after returning an expired slot (it must release no other)")
		st.release(req, b)
		st.release(req, b) // twice: the second releases nothing
		st.wantRemaining(req, 1, "after returning b (twice)")
		st.release(req, c)
		st.wantRemaining(req, 2, "after returning every slot")
	}},
	{"Concurrency/zero-slot-releases-soonest", func(t *testing.T, st *storeTester) {
		req := withAlg(gcra("k", ratelimit.Limit{Rate: 2, Period: time.Minute}, 1), ratelimit.Concurrency)
		st.take(req, allowed(1, time.Minute))
		st.clock.Advance(10 * time.Second)
		st.take(req, allowed(0, time.Minute))
		st.release(req, 0) // the first slot, which would expire at +60s
		st.clock.Advance(55 * time.Second)
		// The second slot (taken at +10s) still holds until +70s.
		st.take(withAlg(gcra("k", req.Limit, 0), ratelimit.Concurrency), allowed(1, 5*time.Second))
	}},
}

// concurrentTakes runs goroutines goroutines that each take req perG times,
// calling before(g, i) first when it is not nil, and returns how many
// takes were allowed and the first error (a goroutine stops at its error).
func concurrentTakes(st *storeTester, req stores.Request, goroutines, perG int, before func(g, i int)) (int64, error) {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perG; i++ {
				if before != nil {
					before(g, i)
				}
				res, err := st.s.Take(context.Background(), req)
				if err != nil {
					errs <- err
					return
				}
				if res.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return admitted.Load(), <-errs
}

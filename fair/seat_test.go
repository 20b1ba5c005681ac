package fair_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/fair"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// admitters are the two ways to take a seat, each returning the release as
// a function: Admit's done, and a Seat's Release from Acquire.
var admitters = []struct {
	name  string
	admit func(*fair.Scheduler, http.ResponseWriter, *http.Request) (func(), bool)
}{
	{"Admit", func(f *fair.Scheduler, w http.ResponseWriter, r *http.Request) (func(), bool) {
		return f.Admit(w, r)
	}},
	{"Acquire", func(f *fair.Scheduler, w http.ResponseWriter, r *http.Request) (func(), bool) {
		s, ok := f.Acquire(w, r)
		return func() { s.Release() }, ok
	}},
}

// TestSecondReleaseFreesNoSeatAnotherRequestHolds: releasing a seat twice
// gives back nothing the second time. Through Admit's done or a Seat's
// Release, for an uncontended admission (whose record of the seat is
// reused by the next one) and for one that waited, a second release leaves
// the next holder's seat taken: Stats counts it, and a third request is
// not admitted to it. Before, a second done freed the next holder's seat.
func TestSecondReleaseFreesNoSeatAnotherRequestHolds(t *testing.T) {
	for _, api := range admitters {
		t.Run(api.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { releaseTwice(t, api.admit) })
		})
	}
}

func releaseTwice(t *testing.T, admit func(*fair.Scheduler, http.ResponseWriter, *http.Request) (func(), bool)) {
	f := oneLevel(1, 10, time.Minute, nil)
	req := func() *http.Request { return httptest.NewRequest("GET", "/", nil) }
	async := func() <-chan admission {
		c := make(chan admission, 1)
		go func() {
			rec := httptest.NewRecorder()
			done, ok := admit(f, rec, req())
			c <- admission{rec, done, ok, time.Now()}
		}()
		return c
	}
	// seatHeld checks that the one seat is taken: a request that would have
	// to wait, with its context already ended, is refused.
	seatHeld := func(when string) {
		t.Helper()
		if s := f.Stats(); s.InUse != 1 || s.Queued != 0 {
			t.Errorf("%s: %+v, want 1 seat in use and nobody queued", when, s)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if done, ok := admit(f, httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/", nil)); ok {
			t.Errorf("%s: a third request was admitted to the held seat", when)
			done()
		}
	}

	a, _ := admit(f, httptest.NewRecorder(), req()) // uncontended
	a()
	b, ok := admit(f, httptest.NewRecorder(), req()) // takes the seat a released
	if !ok {
		t.Fatal("b refused")
	}
	a() // again: b still holds the seat
	seatHeld("uncontended release called twice")

	waiting := async()
	synctest.Wait()
	b()
	c := <-waiting // admitted after waiting
	if !c.ok {
		t.Fatal("c refused")
	}
	b()
	seatHeld("release called twice while a waiter took the seat")
	waiting = async()
	synctest.Wait()
	c.done()
	d := <-waiting
	c.done() // a waiter's release, again
	seatHeld("a waiter's release called twice")
	d.done()
	d.done()
	if s := f.Stats(); s.InUse != 0 || s.Queued != 0 {
		t.Errorf("at the end: %+v, want nothing in use or queued", s)
	}
}

// TestUncontendedAdmissionDoesNotAllocate: when a seat is free and nobody
// waits, Acquire and Release, and a request through Handler, do not
// allocate: with an observer or without, with the seats following an
// adaptive limit, and following the adaptive rule of the limiter the
// Scheduler queues requests for (Handler then runs that limiter too).
// Admit allocates only its done function.
func TestUncontendedAdmissionDoesNotAllocate(t *testing.T) {
	r := httptest.NewRequest("GET", "/api", nil)
	w := ratelimittest.NewDiscardWriter()
	served := 0
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ })
	limit := adaptive.New(adaptive.Config{Min: 4, Max: 64, Initial: 16})
	rule := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: 4, Max: 64, Initial: 16}}})
	for _, c := range []struct {
		name  string
		obs   fair.Observer
		seats func() int
		inner http.Handler
	}{
		{"no observer", nil, nil, next},
		{"observer", fair.ObserverFunc(func(fair.Event) {}), nil, next},
		{"adaptive seats", nil, limit.Limit, next},
		{"an adaptive rule's seats", nil, func() int { return rule.AdaptiveLimit("inflight") }, rule.Handler(next)},
	} {
		cfg := fair.Preset(4, ratelimit.ByIP())
		cfg.Observer, cfg.SeatsFunc = c.obs, c.seats
		f := fair.New(cfg)
		h := f.Handler(c.inner)
		if allocs := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) }); allocs != 0 {
			t.Errorf("%s: %v allocations per uncontended request through Handler, want 0", c.name, allocs)
		}
		if allocs := testing.AllocsPerRun(1000, func() {
			s, ok := f.Acquire(w, r)
			if !ok {
				t.Fatal("refused")
			}
			s.Release()
		}); allocs != 0 {
			t.Errorf("%s: %v allocations per uncontended Acquire and Release, want 0", c.name, allocs)
		}
		if allocs := testing.AllocsPerRun(1000, func() {
			done, ok := f.Admit(w, r)
			if !ok {
				t.Fatal("refused")
			}
			done()
		}); allocs > 1 {
			t.Errorf("%s: %v allocations per uncontended Admit and done, want at most 1", c.name, allocs)
		}
		if st := f.Stats(); st.InUse != 0 {
			t.Errorf("%s: %+v after the requests, want no seat in use", c.name, st)
		}
	}
	if served != 4*1001 {
		t.Errorf("next served %d requests, want %d", served, 4*1001)
	}
}

// TestConcurrentReleasesOfOneSeatFreeItOnce: goroutines take seats (at
// once or after waiting) and each releases its Seat twice at the same
// time, from two goroutines, while the records of released seats are
// reused. No more requests than seats ever hold one, and at the end every
// seat is free and none is counted twice (run with -race).
func TestConcurrentReleasesOfOneSeatFreeItOnce(t *testing.T) {
	const seats, requests = 4, 400
	f := oneLevel(seats, requests, time.Hour, nil)
	var holding, most atomic.Int64
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			s, ok := f.Acquire(ratelimittest.NewDiscardWriter(), httptest.NewRequest("GET", "/", nil))
			if !ok {
				t.Error("refused")
				return
			}
			n := holding.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			holding.Add(-1)
			var both sync.WaitGroup
			both.Go(s.Release)
			s.Release()
			both.Wait()
		})
	}
	wg.Wait()
	if m := most.Load(); m > seats {
		t.Errorf("%d requests held a seat at once, want at most %d", m, seats)
	}
	if st := f.Stats(); st.InUse != 0 || st.Queued != 0 {
		t.Errorf("at the end: %+v, want nothing in use or queued", st)
	}
}

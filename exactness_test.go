package ratelimit_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// stamped is one decision at the time the request carried.
type stamped struct {
	at      time.Time
	allowed bool
}

// suffixBound checks, for every window start s, that the requests stamped at
// or after s and admitted fit in what the limit allows from s on: Rate per
// window touched for the window algorithms, Capacity plus the refill for
// GCRA. A request that arrives late counts in a later window, never an
// earlier one, so it can only lower these counts; a store that restarts a
// window on an older stamp breaks them.
func suffixBound(t *testing.T, alg ratelimit.Algorithm, l ratelimit.Limit, got []stamped) {
	t.Helper()
	sort.Slice(got, func(i, j int) bool { return got[i].at.Before(got[j].at) })
	last := got[len(got)-1].at
	admitted := 0
	for i := len(got) - 1; i >= 0; i-- {
		if got[i].allowed {
			admitted++
		}
		s := got[i].at
		var bound int
		if alg == ratelimit.GCRA {
			bound = l.Capacity() + int(last.Sub(s)/l.Interval())
		} else {
			windows := int(last.Truncate(l.Period).Sub(s.Truncate(l.Period))/l.Period) + 1
			bound = windows * l.Rate
		}
		if admitted > bound {
			t.Fatalf("%v: %d requests stamped at or after %v admitted; the limit allows %d from there to %v",
				alg, admitted, s.Format(time.RFC3339Nano), bound, last.Format(time.RFC3339Nano))
		}
	}
}

var exactAlgorithms = []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindow}

// TestAlternatingStampsAcrossBoundary: 100 requests alternating 3µs either
// side of a window boundary under 10 per minute (a hot key whose callers
// read the clock before queueing) used to restart the window every time and
// admit all 100.
func TestAlternatingStampsAcrossBoundary(t *testing.T) {
	boundary := ratelimittest.Epoch().Add(time.Minute)
	for _, alg := range exactAlgorithms {
		s := memory.New()
		req := stores.Request{Key: "k", Limit: ratelimit.PerMinute(10), Algorithm: alg, Cost: 1}
		var got []stamped
		admitted := 0
		for i := 0; i < 100; i++ {
			at := boundary.Add(-3 * time.Microsecond)
			if i%2 == 1 {
				at = boundary.Add(3 * time.Microsecond)
			}
			res, err := s.TakeAt(at, req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				admitted++
			}
			got = append(got, stamped{at, res.Allowed})
		}
		t.Logf("%v: %d of 100 admitted", alg, admitted)
		suffixBound(t, alg, req.Limit, got)
		if admitted > 11 { // 1 before the boundary, then the later window's 10
			t.Errorf("%v: %d admitted, want at most 11", alg, admitted)
		}
	}
}

// TestOutOfOrderStampsUnderContention: 64 goroutines on one key, with stamps
// scattered a few microseconds around three boundaries and sent in shuffled
// order, never admit more than the limit allows from any window on.
func TestOutOfOrderStampsUnderContention(t *testing.T) {
	l := ratelimit.PerMinute(50)
	for _, alg := range exactAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s := memory.New()
			req := stores.Request{Key: "hot", Limit: l, Algorithm: alg, Cost: 1}
			results := make([][]stamped, 64)
			var wg sync.WaitGroup
			for g := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					for i := 0; i < 40; i++ {
						b := ratelimittest.Epoch().Add(time.Duration(1+rng.IntN(3)) * time.Minute)
						at := b.Add(time.Duration(rng.IntN(20)-10) * time.Microsecond)
						res, err := s.TakeAt(at, req)
						if err != nil {
							t.Error(err)
							return
						}
						results[g] = append(results[g], stamped{at, res.Allowed})
					}
				}()
			}
			wg.Wait()
			var all []stamped
			for _, r := range results {
				all = append(all, r...)
			}
			suffixBound(t, alg, l, all)
		})
	}
}

// TestDailyQuotaSharedBySkewedLimiters: two limiters share Daily(10) through
// one memory store; their clocks differ by 100ms, then 2s, around midnight,
// so one still asks for yesterday's window while the other asks for today's.
// Yesterday gets at most the requests sent before today's first one.
func TestDailyQuotaSharedBySkewedLimiters(t *testing.T) {
	for _, skew := range []time.Duration{100 * time.Millisecond, 2 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			midnight := ratelimittest.Epoch().Add(24 * time.Hour)
			store := memory.New(memory.WithClock(ratelimittest.NewClock(midnight)))
			rules := []ratelimit.Rule{{Name: "daily", Quota: ratelimit.Daily(10, nil), Key: ratelimit.Global()}}
			ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
			behind := ratelimit.NewRules(rules, ratelimit.WithStore(store), ratelimit.WithClock(ratelimittest.NewClock(midnight.Add(-skew/2))))(ok)
			ahead := ratelimit.NewRules(rules, ratelimit.WithStore(store), ratelimit.WithClock(ratelimittest.NewClock(midnight.Add(skew/2))))(ok)
			admitted := 0
			for i := 0; i < 100; i++ {
				h := behind
				if i%2 == 1 {
					h = ahead
				}
				if code, _, _ := serve(h, ratelimittest.NewRequest("GET", "/", "")); code == 200 {
					admitted++
				}
			}
			if admitted > 11 {
				t.Fatalf("skew %v: %d of 100 admitted around midnight under Daily(10)", skew, admitted)
			}
			if admitted < 10 {
				t.Fatalf("skew %v: only %d admitted; today's 10 were not granted", skew, admitted)
			}
		})
	}
}

// TestClockSteppedBackQuota: a calendar quota used up, then the limiter's
// clock stepped back across midnight, does not grant yesterday's quota again.
func TestClockSteppedBackQuota(t *testing.T) {
	for _, step := range []time.Duration{time.Second, time.Minute, time.Hour} {
		clock := ratelimittest.NewClock(ratelimittest.Epoch().Add(24*time.Hour + 30*time.Second))
		h := ratelimit.NewRules([]ratelimit.Rule{{Name: "daily", Quota: ratelimit.Daily(5, nil), Key: ratelimit.Global()}},
			ratelimit.WithStore(memory.New(memory.WithClock(clock))), ratelimit.WithClock(clock))(http.NotFoundHandler())
		admitted := 0
		for i := 0; i < 5; i++ {
			if code, _, _ := serve(h, ratelimittest.NewRequest("GET", "/", "")); code != 429 {
				admitted++
			}
		}
		clock.Advance(-step)
		for i := 0; i < 50; i++ {
			if code, _, _ := serve(h, ratelimittest.NewRequest("GET", "/", "")); code != 429 {
				admitted++
			}
		}
		if admitted != 5 {
			t.Errorf("%v", fmt.Sprintf("clock stepped back %v: %d admitted under Daily(5)", step, admitted))
		}
	}
}

// TestOneHotKeyUnderContentionAdmitsExactlyTheLimitPerWindow: 32
// goroutines released together hammer one key, 100 tries each, in windows
// of one second on a clock that stands still within each: the default
// memory store admits exactly the burst (1,000) in the first window and
// exactly the refill (500) in each next one, through the middleware's fast path
// and through AllowN alike. golang.org/x/time/rate once admitted
// thousands of times its limit under such contention (golang/go#71360):
// an update that lost a race must be decided again, never admitted on
// stale state.
func TestOneHotKeyUnderContentionAdmitsExactlyTheLimitPerWindow(t *testing.T) {
	const goroutines, tries, windows = 32, 100, 16
	limit := ratelimit.PerSecond(500).WithBurst(1000)
	for _, via := range []string{"middleware", "AllowN"} {
		t.Run(via, func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.Epoch())
			l := ratelimit.NewLimiter(limit, ratelimit.Global(), ratelimit.WithClock(clock))
			h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			try := func(w *ratelimittest.DiscardWriter, r *http.Request) bool {
				if via == "AllowN" {
					res, err := l.AllowN(r.Context(), "hot", 1)
					return err == nil && res.Allowed
				}
				w.Reset()
				h.ServeHTTP(w, r)
				return w.Status() == http.StatusOK
			}
			for win := range windows {
				want := int64(limit.Rate) // the refill of one second
				if win == 0 {
					want = int64(limit.Capacity())
				}
				var admitted atomic.Int64
				start := make(chan struct{})
				var wg sync.WaitGroup
				for range goroutines {
					wg.Go(func() {
						w, r := ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", "192.0.2.1:1")
						<-start
						for range tries {
							if try(w, r) {
								admitted.Add(1)
							}
						}
					})
				}
				close(start)
				wg.Wait()
				if got := admitted.Load(); got != want {
					t.Fatalf("window %d: %d of %d requests admitted; the limit admits exactly %d", win, got, goroutines*tries, want)
				}
				clock.Advance(time.Second)
			}
		})
	}
}

package redisstore

// Windows never go back: a request stamped before the window a key holds
// counts against the stored (later) window, whatever the cause (callers
// queued on a hot key, instances with skewed clocks, a clock stepped back),
// and calendar windows follow the store's time.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
)

// windowAlgorithms are the algorithms whose bound is counted per window,
// with a GCRA limit of the same rate for comparison.
var windowAlgorithms = []stores.Algorithm{stores.FixedWindow, stores.SlidingWindow, stores.GCRA}

// admittedBound is the most units a limit may admit to requests stamped in
// [first, last]: Rate per window touched for the window algorithms (a
// sliding window never holds more than Rate in its current window), and
// the burst plus the refill for GCRA.
func admittedBound(alg stores.Algorithm, l stores.Limit, first, last time.Time) int {
	p := int64(l.Period)
	if alg == stores.GCRA {
		return l.Capacity() + int(last.Sub(first)/l.Interval()) + 1
	}
	windows := last.UnixNano()/p - first.UnixNano()/p + 1
	return l.Rate * int(windows)
}

// TestAlternatingStampsNeverRestartAWindow: requests alternating a few
// microseconds either side of window boundaries, as callers queued on a hot
// key arrive, never admit more than the bound.
func TestAlternatingStampsNeverRestartAWindow(t *testing.T) {
	for _, alg := range windowAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s := newStore(standaloneClient(t), WithPrefix(uniquePrefix(t)))
			l := stores.Limit{Rate: 10, Period: time.Second}
			req := withAlg(gcraReq("k", l, 1), alg)
			base := ratelimittest.Epoch()
			admitted := 0
			first, last := base, base
			for b := 1; b <= 3; b++ {
				boundary := base.Add(time.Duration(b) * time.Second)
				for i := range 100 {
					at := boundary.Add(5 * time.Microsecond)
					if i%2 == 1 {
						at = boundary.Add(-5 * time.Microsecond)
					}
					if at.Before(first) {
						first = at
					}
					if at.After(last) {
						last = at
					}
					res, err := s.TakeAt(context.Background(), at, req)
					if err != nil {
						t.Fatal(err)
					}
					if res.Allowed {
						admitted++
					}
				}
			}
			if bound := admittedBound(alg, l, first, last); admitted > bound {
				t.Errorf("%d admitted, bound %d", admitted, bound)
			}
		})
	}
}

// TestOutOfOrderStampsFourInstances: four Stores, 64 goroutines on one key,
// stamps that arrive out of order (each goroutine's stamp alternates either
// side of the sequence by 20 steps): the admitted count never exceeds the
// bound.
func TestOutOfOrderStampsFourInstances(t *testing.T) {
	for _, b := range backends[:2] {
		for _, alg := range windowAlgorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				prefix := uniquePrefix(t)
				peers := make([]*Store, 4)
				for i := range peers {
					peers[i] = newStore(b.client(t), WithPrefix(prefix))
				}
				l := stores.Limit{Rate: 50, Period: 100 * time.Millisecond}
				req := withAlg(gcraReq("hot", l, 1), alg)
				const step = 100 * time.Microsecond
				base := ratelimittest.Epoch().Add(time.Hour)
				var seq, admitted atomic.Int64
				var wg sync.WaitGroup
				for g := range 64 {
					s := peers[g%4]
					wg.Go(func() {
						for range 40 {
							i := seq.Add(1)
							at := base.Add(time.Duration(i)*step + 20*step)
							if i%2 == 1 {
								at = at.Add(-40 * step)
							}
							res, err := s.TakeAt(context.Background(), at, req)
							if err != nil {
								t.Error(err)
								return
							}
							if res.Allowed {
								admitted.Add(1)
							}
						}
					})
				}
				wg.Wait()
				first, last := base.Add(-20*step), base.Add(time.Duration(seq.Load())*step+20*step)
				if bound := admittedBound(alg, l, first, last); int(admitted.Load()) > bound {
					t.Errorf("%d of %d admitted, bound %d", admitted.Load(), seq.Load(), bound)
				}
			})
		}
	}
}

// TestClockSteppedBackAdmitsNothingMore: a client clock (WithClock) stepped
// back by 1s, 1min or 1h after a limit was used up admits nothing until the
// stored window (or GCRA's theoretical arrival time) has passed.
func TestClockSteppedBackAdmitsNothingMore(t *testing.T) {
	for _, alg := range windowAlgorithms {
		for _, back := range []time.Duration{time.Second, time.Minute, time.Hour} {
			t.Run(fmt.Sprintf("%v/%v", alg, back), func(t *testing.T) {
				// Half a second into a minute: each step back crosses into an
				// earlier window.
				clock := ratelimittest.NewClock(ratelimittest.Epoch().Truncate(time.Minute).Add(time.Hour + 500*time.Millisecond))
				prefix := uniquePrefix(t)
				peers := make([]*Store, 4)
				for i := range peers {
					peers[i] = newStore(standaloneClient(t), WithPrefix(prefix), WithClock(clock))
				}
				l := ratelimit.PerMinute(10)
				req := withAlg(gcraReq("k", l, 1), alg)
				admitted := 0
				take := func(i int) {
					t.Helper()
					res, err := peers[i%4].Take(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					if res.Allowed {
						admitted++
					}
				}
				for i := range 20 {
					take(i)
				}
				if admitted != 10 {
					t.Fatalf("%d admitted before the step, want 10", admitted)
				}
				clock.Advance(-back)
				for i := range 40 {
					take(i)
					clock.Advance(time.Millisecond)
				}
				if admitted != 10 {
					t.Errorf("%d admitted after the clock went back %v, want still 10", admitted-10, back)
				}
				// Time moves on past the stored window and the one after it (whose
				// sliding estimate still counts it): the limit admits again.
				clock.Advance(back + 2*time.Minute)
				take(0)
				if admitted != 11 {
					t.Errorf("two minutes on, the limit still denies")
				}
			})
		}
	}
}

// skewedClock is an instance's clock: the server's time plus a skew.
type skewedClock struct {
	server *ratelimittest.Clock
	skew   time.Duration
}

func (c skewedClock) Now() time.Time { return c.server.Now().Add(c.skew) }

// TestDailyQuotaSkewedInstances: four instances whose clocks are skewed
// (ahead and behind by the skew, and by half of it) share Daily(10)
// through the middleware, round-robin, across midnight. The store counts
// against the day of its own time: at most 10 requests are admitted per
// day of that time, however the instances disagree.
func TestDailyQuotaSkewedInstances(t *testing.T) {
	for _, skew := range []time.Duration{100 * time.Millisecond, 2 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			const n = 10
			midnight := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			server := ratelimittest.NewClock(midnight.Add(-3 * time.Second))
			prefix := uniquePrefix(t)
			var handlers []http.Handler
			for _, k := range []time.Duration{skew, -skew, skew / 2, -skew / 2} {
				store := newStore(standaloneClient(t), WithPrefix(prefix), WithClock(server))
				mw := ratelimit.NewRules([]ratelimit.Rule{{
					Name: "daily", Quota: ratelimit.Daily(n, time.UTC), Key: ratelimit.Global(),
				}}, ratelimit.WithStore(store), ratelimit.WithClock(skewedClock{server, k}))
				handlers = append(handlers, mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
			}
			perDay := map[string]int{}
			for i := range 240 { // 6s around midnight, 25ms apart
				rec := httptest.NewRecorder()
				handlers[i%4].ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
				switch rec.Code {
				case http.StatusOK:
					perDay[server.Now().Format(time.DateOnly)]++
				case http.StatusTooManyRequests:
				default:
					t.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
				server.Advance(25 * time.Millisecond)
			}
			for day, count := range perDay {
				if count > n {
					t.Errorf("%s (server time): %d admitted under Daily(%d)", day, count, n)
				}
			}
			if len(perDay) != 2 {
				t.Errorf("admitted per day %v, want both days used", perDay)
			}
		})
	}
}

// offsetClock is the system clock plus a skew: an instance whose clock is off.
type offsetClock time.Duration

func (c offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c)) }

// TestDailyQuotaOnServerTime: the same on Redis's own TIME (no WithClock
// on the Stores). In a time zone whose midnight is a minute away, one
// instance runs two minutes ahead (already on the next day) and one two
// minutes behind: each sends its own day with its neighbours, and the
// script counts both against the server's day, so Daily(10) admits 10.
func TestDailyQuotaOnServerTime(t *testing.T) {
	const n = 10
	client := standaloneClient(t)
	serverNow, err := client.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	midnight := serverNow.Add(time.Minute).Truncate(time.Second)
	zone := time.FixedZone("test", -int(midnight.Unix()%86400))
	prefix := uniquePrefix(t)
	var handlers []http.Handler
	for _, skew := range []time.Duration{2 * time.Minute, -2 * time.Minute} {
		mw := ratelimit.NewRules([]ratelimit.Rule{{
			Name: "daily", Quota: ratelimit.Daily(n, zone), Key: ratelimit.Global(),
		}}, ratelimit.WithStore(newStore(client, WithPrefix(prefix))), ratelimit.WithClock(offsetClock(skew)))
		handlers = append(handlers, mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	}
	admitted := 0
	for i := range 100 {
		rec := httptest.NewRecorder()
		handlers[i%2].ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code == http.StatusOK {
			admitted++
		}
	}
	if now, err := client.Time(context.Background()).Result(); err != nil || !now.Before(midnight) {
		t.Skipf("the server's day turned during the test (%v, %v): no verdict", now, err)
	}
	if admitted != n {
		t.Errorf("%d admitted under Daily(%d) by instances on either side of midnight", admitted, n)
	}
}

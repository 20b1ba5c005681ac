package ratelimit_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// pacedHandler is a paced limiter over a handler that records when each
// request was served; inside a synctest bubble the times are exact.
func pacedHandler(limit ratelimit.Limit, p ratelimit.Pace, opts ...ratelimit.Option) (http.Handler, func() []time.Time) {
	return pacedRule(ratelimit.Rule{Limit: limit, Pace: p}, opts...)
}

// pacedRule is pacedHandler for the rule ru, keyed by X-Key.
func pacedRule(ru ratelimit.Rule, opts ...ratelimit.Option) (http.Handler, func() []time.Time) {
	var mu sync.Mutex
	var served []time.Time
	ru.Key = ratelimit.ByHeader("X-Key")
	h := ratelimit.NewRules([]ratelimit.Rule{ru}, opts...)(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			mu.Lock()
			served = append(served, time.Now())
			mu.Unlock()
		}))
	return h, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(served)
	}
}

func keyed(key string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Key", key)
	return r
}

// TestPacedRequestsAreServedOnTheRateGrid: 50 requests arriving at once at
// 100 rps with no burst are served one every 10ms, in arrival order of
// their reservations, none early and none late.
func TestPacedRequestsAreServedOnTheRateGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, served := pacedHandler(ratelimit.PerSecond(100).WithBurst(1), ratelimit.Pace{MaxDelay: time.Second})
		start := time.Now()
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if code, _, _ := serve(h, keyed("k")); code != 200 {
					t.Errorf("status %d; want 200", code)
				}
			})
		}
		wg.Wait()
		got := served()
		slices.SortFunc(got, func(a, b time.Time) int { return a.Compare(b) })
		for i, at := range got {
			if want := start.Add(time.Duration(i) * 10 * time.Millisecond); !at.Equal(want) {
				t.Fatalf("request %d served at +%v; want +%v", i, at.Sub(start), want.Sub(start))
			}
		}
		if len(got) != 50 {
			t.Fatalf("%d served; want 50", len(got))
		}
	})
}

// TestPacedRequestBeyondMaxDelayIsRejectedAtOnce: a request that would
// wait longer than MaxDelay, or than its context's deadline allows, is
// rejected without waiting, with the delay it needed (rounded up to whole
// seconds) as Retry-After, and consumes nothing.
func TestPacedRequestBeyondMaxDelayIsRejectedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := time.Now()
		h, served := pacedHandler(ratelimit.PerSecond(2).WithBurst(1), ratelimit.Pace{MaxDelay: 1200 * time.Millisecond})
		var wg sync.WaitGroup
		for range 3 { // served at +0, +500ms, +1s
			wg.Go(func() { serve(h, keyed("k")) })
		}
		synctest.Wait()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, keyed("k")) // would wait 1.5s
		if rec.Code != 429 || rec.Header().Get("Retry-After") != "2" || time.Since(clock) != 0 {
			t.Fatalf("4th: status %d, Retry-After %q after %v; want 429 at once with Retry-After 2 (1.5s rounded up)",
				rec.Code, rec.Header().Get("Retry-After"), time.Since(clock))
		}
		// A deadline 100ms away cannot wait the 1.5s: rejected at once too.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, keyed("k").WithContext(ctx))
		if rec.Code != 429 || time.Since(clock) != 0 {
			t.Fatalf("request with a 100ms deadline: status %d after %v; want 429 at once", rec.Code, time.Since(clock))
		}
		wg.Wait()
		// Neither rejection consumed: the next request is served at +1.5s.
		serve(h, keyed("k"))
		got := served()
		if last := got[len(got)-1].Sub(clock); last != 1500*time.Millisecond {
			t.Fatalf("the request after the rejections was served at +%v; want +1.5s", last)
		}
	})
}

// TestPacedWaitersAreBoundedPerRuleAndPerKey: beyond MaxWaiting (and
// MaxWaitingPerKey) a request that would wait is rejected at once, while
// one that fits without waiting is still served.
func TestPacedWaitersAreBoundedPerRuleAndPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := pacedHandler(ratelimit.PerSecond(10).WithBurst(1),
			ratelimit.Pace{MaxDelay: time.Minute, MaxWaiting: 3, MaxWaitingPerKey: 2})
		var wg sync.WaitGroup
		codes := make(chan int, 10)
		send := func(key string) {
			wg.Go(func() {
				code, _, _ := serve(h, keyed(key))
				codes <- code
			})
			synctest.Wait()
		}
		send("a") // served at once: no wait, no waiting place kept
		send("a") // waits
		send("a") // waits: key a's two places
		send("a") // a third waiter of key a: rejected
		send("b") // served at once
		send("b") // waits: the rule's third place
		send("c") // served at once (c's bucket is full)
		send("c") // would wait, the rule's places are taken: rejected
		if got := len(codes); got != 5 {
			t.Fatalf("%d requests finished before the waiters; want 5 (3 served at once, 2 rejected)", got)
		}
		wg.Wait()
		close(codes)
		counts := map[int]int{}
		for c := range codes {
			counts[c]++
		}
		if counts[200] != 6 || counts[429] != 2 {
			t.Fatalf("statuses %v; want 6 served and 2 rejected", counts)
		}
	})
}

// TestCancelledWaitersGiveBackTheirPlaces: 10,000 requests waiting for
// their turn cost under 1 KB of heap each beyond what as many requests
// parked in a handler cost; when their contexts end (first come, first
// gone: each leaves while later ones still wait) they answer 503, no
// goroutine is left in the limiter, and the key's state is exactly as if
// they had never come.
func TestCancelledWaitersGiveBackTheirPlaces(t *testing.T) {
	const n = 10_000
	synctest.Test(t, func(t *testing.T) {
		parked := ratelimit.New(ratelimit.PerSecond(1_000_000), ratelimit.ByHeader("X-Key"))(
			http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		perParked, _ := parkThenCancel(parked, n)

		store := memory.New()
		limit := ratelimit.PerSecond(1000).WithBurst(1)
		h, served := pacedRule(ratelimit.Rule{Name: "paced", Limit: limit, Pace: ratelimit.Pace{MaxDelay: time.Minute, MaxWaiting: n}},
			ratelimit.WithStore(store))
		serve(h, keyed("k")) // the bucket is now empty: every later request waits
		perWaiter, recs := parkThenCancel(h, n)
		if extra := perWaiter - perParked; extra > 1024 {
			t.Errorf("a waiting request holds %d bytes of heap, %d more than one parked in a handler; want at most 1 KB more", perWaiter, extra)
		}
		t.Logf("heap per request: %d bytes waiting for its turn, %d parked in a handler", perWaiter, perParked)
		if n := goroutinesIn("ratelimit.(*Limiter).wait", "ratelimit.(*Limiter).serve"); n > 0 {
			t.Errorf("%d goroutines still in the limiter after the waiters left", n)
		}
		for i, rec := range recs {
			if rec.Code != 503 {
				t.Fatalf("waiter %d: status %d; want 503", i, rec.Code)
			}
		}
		if len(served()) != 1 {
			t.Fatalf("%d served; want only the first", len(served()))
		}
		got, err := store.Take(context.Background(), stores.Request{Rule: "paced", Key: "k", Limit: limit})
		if err != nil || got.ResetAfter != time.Millisecond {
			t.Fatalf("state after the cancellations: %+v, %v; want that of the one request served (ResetAfter 1ms)", got, err)
		}
	})
}

// parkThenCancel serves n requests with h until all are blocked, measures
// the heap they hold, then cancels them and waits for all to return. It
// returns the heap per request and their responses.
func parkThenCancel(h http.Handler, n int) (int64, []*httptest.ResponseRecorder) {
	reqs := make([]*http.Request, n)
	recs := make([]*httptest.ResponseRecorder, n)
	cancels := make([]context.CancelFunc, n)
	for i := range reqs {
		ctx, cancel := context.WithCancel(context.Background())
		reqs[i], recs[i], cancels[i] = keyed("k").WithContext(ctx), httptest.NewRecorder(), cancel
	}
	before := heapInUse()
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() { h.ServeHTTP(recs[i], reqs[i]) })
	}
	synctest.Wait() // all blocked
	per := (heapInUse() - before) / int64(n)
	for _, cancel := range cancels {
		cancel()
	}
	wg.Wait()
	synctest.Wait()
	return per, recs
}

// goroutinesIn counts the goroutines whose stack holds one of the
// functions named (all goroutines of the process are looked at, but only
// this test's can be in them: other tests' counts do not matter).
func goroutinesIn(funcs ...string) int {
	count := 0
	for _, g := range goroutineStacks() {
		for _, f := range funcs {
			if strings.Contains(g, f) {
				count++
				break
			}
		}
	}
	return count
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestPaceIsRejectedWhereItCannotBeHonoured: pacing needs GCRA, an
// enforced rule, a MaxDelay, no other enforced rule beside it (it would
// count the request when decided, not when served) and no adaptive rule
// (the wait would count as the server's latency); a concurrency limit has
// no cost to settle.
func TestPaceIsRejectedWhereItCannotBeHonoured(t *testing.T) {
	for name, build := range map[string]func(){
		"sliding window": func() {
			ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerSecond(1), Key: ratelimit.Global(), Algorithm: ratelimit.SlidingWindow, Pace: ratelimit.Pace{MaxDelay: time.Second}}})
		},
		"shadow": func() {
			ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerSecond(1), Key: ratelimit.Global(), Shadow: true,
				Pace: ratelimit.Pace{MaxDelay: time.Second}}})
		},
		"no MaxDelay": func() {
			ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerSecond(1), Key: ratelimit.Global(), Pace: ratelimit.Pace{MaxWaiting: 3}}})
		},
		"negative": func() {
			ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerSecond(1), Key: ratelimit.Global(), Pace: ratelimit.Pace{MaxDelay: -time.Second}}})
		},
		"beside an adaptive rule": func() {
			ratelimit.NewRulesLimiter([]ratelimit.Rule{
				{Limit: ratelimit.PerSecond(1), Key: ratelimit.Global(), Pace: ratelimit.Pace{MaxDelay: time.Second}},
				{Name: "adaptive", Key: ratelimit.Global(), Adaptive: &adaptive.Config{}},
			})
		},
		"beside another enforced rule": func() {
			ratelimit.NewRulesLimiter([]ratelimit.Rule{
				{Name: "user", Limit: ratelimit.PerSecond(1), Key: ratelimit.ByHeader("X-Key"), Pace: ratelimit.Pace{MaxDelay: time.Second}},
				{Name: "global", Limit: ratelimit.PerSecond(10), Key: ratelimit.Global()},
			})
		},
		"settled concurrency": func() {
			ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerSecond(1), Key: ratelimit.Global(), Algorithm: ratelimit.Concurrency, Settled: true}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if p, ok := recover().(string); !ok || len(p) < 11 || p[:11] != "ratelimit: " {
					t.Fatalf("panic %v; want a ratelimit: message", p)
				}
			}()
			build()
		})
	}
}

// TestAllowNWaitsForItsPacedTurn: AllowN under a paced rule returns when
// the events' turn comes; cancelled while it waits, it gives the turn back
// and its error wraps the context's.
func TestAllowNWaitsForItsPacedTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerSecond(10).WithBurst(1), Key: ratelimit.Global(), Pace: ratelimit.Pace{MaxDelay: time.Second}}})
		start := time.Now()
		for i := range 3 {
			res, err := l.Allow(context.Background(), "k")
			if want := time.Duration(i) * 100 * time.Millisecond; err != nil || !res.Allowed || time.Since(start) != want {
				t.Fatalf("Allow %d: %+v, %v at +%v; want allowed at +%v", i, res, err, time.Since(start), want)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(50 * time.Millisecond) // virtual time: cancel mid-wait
			cancel()
		}()
		if _, err := l.Allow(ctx, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Allow cancelled while waiting: %v; want context.Canceled", err)
		}
		// Its turn (+300ms) was given back: the next one takes it.
		turn := time.Now()
		if _, err := l.Allow(context.Background(), "k"); err != nil || time.Since(turn) != 50*time.Millisecond {
			t.Fatalf("after the cancellation: %v, waited %v; want the freed turn, 50ms later", err, time.Since(turn))
		}
	})
}

// gcraBoundViolation returns a pair of served times i<j that break the
// GCRA bound of a limit with capacity cap and interval iv: in any closed
// span [t_i, t_j] at most cap + (t_j-t_i)/iv requests may be served.
func gcraBoundViolation(served []time.Time, capacity int, iv time.Duration) (int, int, bool) {
	slices.SortFunc(served, func(a, b time.Time) int { return a.Compare(b) })
	for i := range served {
		for j := i; j < len(served); j++ {
			if n := j - i + 1; n > capacity+int(served[j].Sub(served[i])/iv) {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

// TestCancelledMiddleReservationsKeepTheSpacing: at 10 rps with no burst,
// the clients of five turns in the middle of the queue leave and newcomers
// arrive: no two requests are ever served less than 100ms apart (a freed
// turn is not handed to a newcomer while a later waiter holds the next).
func TestCancelledMiddleReservationsKeepTheSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, served := pacedHandler(ratelimit.PerSecond(10).WithBurst(1), ratelimit.Pace{MaxDelay: time.Second})
		var wg sync.WaitGroup
		cancels := make([]context.CancelFunc, 11)
		for i := range 11 { // turns at +0, +100ms, ..., +1s, booked in order
			ctx, cancel := context.WithCancel(context.Background())
			cancels[i] = cancel
			wg.Go(func() { serve(h, keyed("k").WithContext(ctx)) })
			synctest.Wait()
		}
		for i := 1; i <= 5; i++ { // the clients of the turns +100ms..+500ms leave
			cancels[i]()
		}
		synctest.Wait()
		for range 5 { // newcomers, still at +0
			wg.Go(func() { serve(h, keyed("k")) })
			synctest.Wait()
		}
		wg.Wait()
		got := served()
		if i, j, bad := gcraBoundViolation(got, 1, 100*time.Millisecond); bad {
			t.Fatalf("%d requests served between +%v and +%v under 10 rps with no burst", j-i+1, got[i].Sub(got[0]), got[j].Sub(got[0]))
		}
		// The freed turns stay empty, so the newcomers' turns would come
		// after +1.1s, beyond MaxDelay: they are rejected.
		if len(got) != 6 {
			t.Fatalf("%d served; want the 6 who stayed", len(got))
		}
	})
}

// delayingStore reports Delay on every admission, as a misbehaving store.
type delayingStore struct {
	ratelimit.Store
	delay time.Duration
}

func (s delayingStore) Take(ctx context.Context, r stores.Request) (ratelimit.Result, error) {
	res, err := s.Store.Take(ctx, r)
	if res.Allowed {
		res.Delay = s.delay
	}
	return res, err
}

// TestWaitIsBoundedByMaxDelayWhateverTheStoreSays: a store that answers
// an hour's Delay holds a request at most the rule's MaxDelay.
func TestWaitIsBoundedByMaxDelayWhateverTheStoreSays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerSecond(10), Key: ratelimit.Global(), Pace: ratelimit.Pace{MaxDelay: time.Second}}}, ratelimit.WithStore(delayingStore{memory.New(), time.Hour}))
		start := time.Now()
		if _, err := l.Allow(context.Background(), "k"); err != nil || time.Since(start) != time.Second {
			t.Fatalf("Allow: %v after %v; want served after MaxDelay (1s)", err, time.Since(start))
		}
	})
}

// TestUnboundedMaxDelayAdmitsWhatFits: MaxDelay of math.MaxInt64 (no
// bound on the wait) does not overflow into a denial.
func TestUnboundedMaxDelayAdmitsWhatFits(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerSecond(10), Key: ratelimit.Global(), Pace: ratelimit.Pace{MaxDelay: math.MaxInt64}}})
	if res, err := l.Allow(context.Background(), "k"); err != nil || !res.Allowed {
		t.Fatalf("a fresh key under Pace{MaxDelay: MaxInt64}: %+v, %v; want allowed", res, err)
	}
}

// TestAllowAtMostNeverWaitsForATurn: under a paced rule, AllowAtMost grants
// what fits now, at once, rather than waiting for turns.
func TestAllowAtMostNeverWaitsForATurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerSecond(10).WithBurst(5), Key: ratelimit.Global(), Pace: ratelimit.Pace{MaxDelay: time.Second}}})
		if _, err := l.AllowN(context.Background(), "k", 3); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		granted, res, err := l.AllowAtMost(context.Background(), "k", 5)
		if err != nil || granted != 2 || time.Since(start) != 0 {
			t.Fatalf("AllowAtMost(5) with 2 left = %d, %+v, %v after %v; want 2 at once", granted, res, err, time.Since(start))
		}
	})
}

// TestPacedResponseFieldsDescribeTheMomentServed: a request that waited a
// minute for its turn reports the reset as seen when it is served, not
// when it was decided.
func TestPacedResponseFieldsDescribeTheMomentServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := pacedHandler(ratelimit.PerMinute(1).WithBurst(1), ratelimit.Pace{MaxDelay: 2 * time.Minute})
		serve(h, keyed("k"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, keyed("k")) // waits 60s for its turn
		f, err := ratelimittest.ParseRateLimit(rec.Result().Header)
		if rec.Code != 200 || err != nil || f.Reset != time.Minute {
			t.Fatalf("status %d, fields %+v (%v); want 200 with a reset of 60s at the moment served (120s when decided)", rec.Code, f, err)
		}
	})
}

// TestPacedWaitersHoldNoGoroutineOfTheirOwn: while 100 requests wait for
// their turns, the test's bubble runs 100 goroutines more than before (the
// requests' own), not one more per waiter: the limiter waits on a timer in
// the request's goroutine, with no goroutine, AfterFunc or polling loop of
// its own.
func TestPacedWaitersHoldNoGoroutineOfTheirOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, served := pacedHandler(ratelimit.PerSecond(10).WithBurst(1), ratelimit.Pace{MaxDelay: time.Hour})
		serve(h, keyed("k")) // the bucket is empty: the next requests wait
		synctest.Wait()
		before := bubbleGoroutines()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() { serve(h, keyed("k").WithContext(ctx)) })
		}
		synctest.Wait()
		if extra := bubbleGoroutines() - before; extra != 100 {
			t.Errorf("%d goroutines more while 100 requests wait for their turns; want 100 (their own)", extra)
		}
		cancel()
		wg.Wait()
		synctest.Wait()
		if n := bubbleGoroutines(); n != before {
			t.Errorf("%d goroutines after the waiters left; want %d", n, before)
		}
		if len(served()) != 1 {
			t.Fatalf("%d served; want only the first", len(served()))
		}
	})
}

// bubbleGoroutines counts the goroutines of synctest bubbles: those of the
// running test (tests of this package do not run in parallel), whatever
// other goroutines of the process start or end meanwhile.
func bubbleGoroutines() int {
	count := 0
	for _, g := range goroutineStacks() {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "synctest bubble") {
			count++
		}
	}
	return count
}

// goroutineStacks returns the stack of every goroutine of the process, one
// string each.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

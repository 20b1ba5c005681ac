package ratelimit_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// settling is a settled limiter with an estimate of est units per request
// over a handler that reports, with Settle, the cost in X-Actual (none when
// absent), after running before.
func settling(limit ratelimit.Limit, est int, before func(*http.Request), opts ...ratelimit.Option) http.Handler {
	return settlingRule(ratelimit.Rule{Limit: limit}, est, before, opts...)
}

// settlingRule is settling with the limit and algorithm of ru.
func settlingRule(ru ratelimit.Rule, est int, before func(*http.Request), opts ...ratelimit.Option) http.Handler {
	ru.Key, ru.Settled, ru.Cost = ratelimit.Global(), true, func(*http.Request) int { return est }
	return ratelimit.NewRules([]ratelimit.Rule{ru}, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if before != nil {
			before(r)
		}
		if a := r.Header.Get("X-Actual"); a != "" {
			n, _ := strconv.Atoi(a)
			if !ratelimit.Settle(r.Context(), w, n) {
				panic("Settle found no settled rule")
			}
		}
	}))
}

func actual(n int) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Actual", strconv.Itoa(n))
	return r
}

func probeRemaining(t *testing.T, h http.Handler) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 {
		t.Fatalf("probe: status %d", rec.Code)
	}
	f, err := ratelimittest.ParseRateLimit(rec.Result().Header)
	if err != nil {
		t.Fatal(err)
	}
	return f.Remaining
}

// TestSettledCostIsChargedInFull: a handler that reports ten times its
// estimate is charged ten times, and the next request sees it; one that
// reports less gets the difference back.
func TestSettledCostIsChargedInFull(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	h := settling(ratelimit.PerHour(100), 2, nil, ratelimit.WithClock(clock))
	serve(h, actual(20))
	if got := probeRemaining(t, h); got != 100-20-2 {
		t.Fatalf("after a request settled at 20 (estimate 2): Remaining %d after the probe; want 78", got)
	}
	serve(h, actual(1)) // estimate 2, actual 1: one given back
	if got := probeRemaining(t, h); got != 100-20-2-1-2 {
		t.Fatalf("after a request settled at 1: Remaining %d after the probe; want 75", got)
	}
}

// TestSettlementOutlivesTheClient: the client disconnects mid-handler (its
// context is cancelled), the handler still reports its cost, and the
// settlement is made on a context that is not the client's.
func TestSettlementOutlivesTheClient(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	store := liveCtxStore{memory.New(memory.WithClock(clock))}
	ctx, cancel := context.WithCancel(context.Background())
	h := settling(ratelimit.PerHour(100), 1, func(*http.Request) { cancel() }, ratelimit.WithClock(clock), ratelimit.WithStore(store))
	serve(h, actual(30).WithContext(ctx))
	h2 := settling(ratelimit.PerHour(100), 1, nil, ratelimit.WithClock(clock), ratelimit.WithStore(store))
	if got := probeRemaining(t, h2); got != 100-30-1 {
		t.Fatalf("after a disconnected request settled at 30: Remaining %d; want 69", got)
	}
}

// liveCtxStore fails calls made on a context that has ended, as a
// networked store would.
type liveCtxStore struct{ ratelimit.Store }

func (s liveCtxStore) Take(ctx context.Context, r stores.Request) (ratelimit.Result, error) {
	if err := ctx.Err(); err != nil {
		return ratelimit.Result{}, err
	}
	return s.Store.Take(ctx, r)
}

func (s liveCtxStore) Return(ctx context.Context, r stores.Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.Return(ctx, r)
}

// TestSettlementCountsInTheRequestsWindow: a fixed-window request settled
// after its window ended changes nothing in the next window, and a sliding
// window request settled in the next window counts in its own (now the
// previous) one.
func TestSettlementCountsInTheRequestsWindow(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.Epoch())
			store := memory.New(memory.WithClock(clock))
			late := func(*http.Request) { clock.Advance(time.Minute) } // the handler runs into the next window
			opts := []ratelimit.Option{ratelimit.WithClock(clock), ratelimit.WithStore(store)}
			ru := ratelimit.Rule{Limit: ratelimit.PerMinute(100), Algorithm: alg}
			serve(settlingRule(ru, 1, late, opts...), actual(60))
			probe := settlingRule(ru, 1, nil, opts...)
			want := 100 - 1 // the request's fixed window has ended: only the probe counts
			if alg == ratelimit.SlidingWindow {
				// Its window is the previous one, fully weighted at the start
				// of the next: 60 there, and the probe's 1.
				want = 100 - 60 - 1
			}
			if got := probeRemaining(t, probe); got != want {
				t.Fatalf("Remaining %d after a request settled at 60 past its window; want %d", got, want)
			}
		})
	}
}

// TestSettlementsKeepTheExactBounds: requests admitted on an estimate of 2
// and settled at 0 to 6, one after another at random moments. The units
// charged stay within each exact algorithm's bound plus one request's
// excess (the last admission is decided on its estimate): GCRA, in any
// hour, its capacity plus its rate over the hour; a fixed window, in each
// window, its rate.
func TestSettlementsKeepTheExactBounds(t *testing.T) {
	for _, tc := range []struct {
		alg   ratelimit.Algorithm
		limit ratelimit.Limit
		bound int // excess included
		// span says whether charges at a and b count together
		span func(a, b time.Duration) bool
	}{
		{ratelimit.GCRA, ratelimit.PerHour(60).WithBurst(10), 10 + 60 + (6 - 2),
			func(a, b time.Duration) bool { return b-a < time.Hour }},
		{ratelimit.FixedWindow, ratelimit.PerHour(60), 60 + (6 - 2),
			func(a, b time.Duration) bool { return a/time.Hour == b/time.Hour }},
	} {
		t.Run(tc.alg.String(), func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.Epoch())
			h := settlingRule(ratelimit.Rule{Limit: tc.limit, Algorithm: tc.alg}, 2, nil, ratelimit.WithClock(clock))
			rng := rand.New(rand.NewPCG(7, 11))
			type charge struct {
				at    time.Duration
				units int
			}
			var charges []charge
			denied := 0
			for range 5000 {
				clock.Advance(time.Duration(rng.IntN(60)) * time.Second)
				n := rng.IntN(7) // 0..6 against the estimate of 2
				if code, _, _ := serve(h, actual(n)); code == 200 {
					charges = append(charges, charge{clock.Now().Sub(ratelimittest.Epoch()), n})
				} else {
					denied++
				}
			}
			for i := range charges {
				sum := 0
				for j := i; j < len(charges) && tc.span(charges[i].at, charges[j].at); j++ {
					sum += charges[j].units
				}
				if sum > tc.bound {
					t.Fatalf("%d units charged from +%v; bound %d", sum, charges[i].at, tc.bound)
				}
			}
			if len(charges) < 500 || denied < 1000 {
				t.Fatalf("%d requests admitted, %d denied: the test does not load the limit", len(charges), denied)
			}
		})
	}
}

// TestSettleReachesNestedLimiters: Settle reports to every settled limiter
// serving the request, and to none outside a limiter.
func TestSettleReachesNestedLimiters(t *testing.T) {
	if ratelimit.Settle(httptest.NewRequest("GET", "/", nil).Context(), ratelimittest.NewDiscardWriter(), 5) ||
		ratelimit.Settle(context.Background(), nil, 5) {
		t.Fatal("Settle outside a limiter reported a settled rule")
	}
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	outer := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true, Name: "outer"}}, ratelimit.WithClock(clock))
	inner := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(50), Key: ratelimit.Global(), Settled: true, Name: "inner"}}, ratelimit.WithClock(clock))
	h := outer.Handler(inner.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ratelimit.Settle(r.Context(), w, 11)
	})))
	serve(h, httptest.NewRequest("GET", "/", nil))
	for _, l := range []*ratelimit.Limiter{outer, inner} {
		res, err := l.AllowN(context.Background(), "global", 0)
		if err != nil || res.Remaining != res.Limit.Rate-11 {
			t.Fatalf("%v: %+v, %v; want Remaining %d", res.Limit, res, err, res.Limit.Rate-11)
		}
	}
}

// TestAllowAtMostGrantsWhatFits: a batch caller gets as many of its events
// as fit, never more, and zero with the wait when none fit.
func TestAllowAtMostGrantsWhatFits(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "wide", Limit: ratelimit.PerMinute(100), Key: ratelimit.Global()},
		{Name: "narrow", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global()},
	}, ratelimit.WithClock(clock))
	ctx := context.Background()
	for _, step := range []struct{ ask, want int }{{4, 4}, {15, 6}, {3, 0}} {
		got, res, err := l.AllowAtMost(ctx, "k", step.ask)
		if err != nil || got != step.want {
			t.Fatalf("AllowAtMost(%d) = %d, %+v, %v; want %d", step.ask, got, res, err, step.want)
		}
		if got == 0 && res.RetryAfter != 6*time.Second {
			t.Fatalf("AllowAtMost with nothing left: RetryAfter %v; want 6s", res.RetryAfter)
		}
	}
	if _, _, err := l.AllowAtMost(ctx, "k", -1); !errors.Is(err, ratelimit.ErrInvalidRequest) {
		t.Fatalf("AllowAtMost(-1): %v; want ErrInvalidRequest", err)
	}
}

// TestSettlesReportsSettledRules: Settles is true exactly when a rule
// settles (Rule.Settled).
func TestSettlesReportsSettledRules(t *testing.T) {
	if ratelimit.NewLimiter(ratelimit.PerHour(1), ratelimit.Global()).Settles() {
		t.Fatal("a limiter without settlement reports Settles")
	}
	if !ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(1), Key: ratelimit.Global(), Settled: true}}).Settles() {
		t.Fatal("Rule.Settled: Settles is false")
	}
	rules := []ratelimit.Rule{
		{Name: "a", Limit: ratelimit.PerHour(1), Key: ratelimit.Global()},
		{Name: "b", Limit: ratelimit.PerHour(1), Key: ratelimit.Global(), Settled: true},
	}
	if !ratelimit.NewRulesLimiter(rules).Settles() {
		t.Fatal("Rule.Settled: Settles is false")
	}
	if ratelimit.NewRulesLimiter(rules[:1]).Settles() {
		t.Fatal("no settled rule: Settles is true")
	}
}

// TestVerdictContextTwiceIsHarmless: deriving the handler's context twice
// from one verdict (an adapter, then a wrapper of the user's) neither
// loops nor charges twice.
func TestVerdictContextTwiceIsHarmless(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true}}, ratelimit.WithClock(clock))
	r := httptest.NewRequest("GET", "/", nil)
	v := l.Check(r)
	ctx := v.Context(v.Context(r.Context()))
	if !ratelimit.Settle(ctx, nil, 5) {
		t.Fatal("Settle found no rule to settle")
	}
	v.Done()
	if res, _ := l.AllowN(context.Background(), "global", 0); res.Remaining != 95 {
		t.Fatalf("Remaining %d after a settlement of 5; want 95", res.Remaining)
	}
}

// TestSettleContextIsItsParent: the context that carries a request's
// settlement is its parent in every other respect (values, deadline,
// cancellation), and one verdict's contexts for two unrelated parents both
// reach it, each keeping its own parent.
func TestSettleContextIsItsParent(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true}}, ratelimit.WithClock(clock))
	type key struct{}
	v := l.Check(httptest.NewRequest("GET", "/", nil))
	deadline := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p1, cancel1 := context.WithDeadline(context.WithValue(context.Background(), key{}, "one"), deadline)
	p2, cancel2 := context.WithCancel(context.WithValue(context.Background(), key{}, "two"))
	defer cancel2()
	c1, c2 := v.Context(p1), v.Context(p2)
	if c1.Value(key{}) != "one" || c2.Value(key{}) != "two" {
		t.Fatalf("values %v, %v; want one, two", c1.Value(key{}), c2.Value(key{}))
	}
	if d, ok := c1.Deadline(); !ok || !d.Equal(deadline) {
		t.Fatalf("deadline %v %v; want %v", d, ok, deadline)
	}
	cancel1()
	<-c1.Done()
	if c1.Err() != context.Canceled || c2.Err() != nil {
		t.Fatalf("errors %v, %v after the first parent's cancellation; want canceled, nil", c1.Err(), c2.Err())
	}
	if !ratelimit.Settle(c2, nil, 3) || !ratelimit.Settle(c1, nil, 5) {
		t.Fatal("Settle found no rule to settle")
	}
	v.Done()
	if res, _ := l.AllowN(context.Background(), "global", 0); res.Remaining != 95 {
		t.Fatalf("Remaining %d after a settlement of 5 (the last call); want 95", res.Remaining)
	}
}

// TestSettleAfterTheResponseReportsFalse: once the request has been
// served, Settle (from a goroutine the handler left behind) changes
// nothing and says so.
func TestSettleAfterTheResponseReportsFalse(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true}}, ratelimit.WithClock(clock))
	var (
		w http.ResponseWriter
		r *http.Request
	)
	serve(l.Handler(http.HandlerFunc(func(hw http.ResponseWriter, hr *http.Request) { w, r = hw, hr })), httptest.NewRequest("GET", "/", nil))
	if ratelimit.Settle(r.Context(), w, 40) {
		t.Fatal("Settle after the response reported a rule to settle")
	}
	if res, _ := l.AllowN(context.Background(), "global", 0); res.Remaining != 99 {
		t.Fatalf("Remaining %d; want 99 (the estimate only)", res.Remaining)
	}
}

// TestHugeSettlementIsBounded: Settle(r.Context(), w, math.MaxInt) puts the key in
// the largest debt, and the next response's fields stay well-formed.
func TestHugeSettlementIsBounded(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerMinute(100), Key: ratelimit.Global(), Settled: true}}, ratelimit.WithClock(clock))
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ratelimit.Settle(r.Context(), w, math.MaxInt) }))
	serve(h, httptest.NewRequest("GET", "/", nil))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	f, err := ratelimittest.ParseRateLimit(rec.Result().Header)
	if ra := rec.Header().Get("Retry-After"); rec.Code != 429 || err != nil || f.Remaining != 0 || f.Reset <= 0 || ra == "" || ra[0] == '-' {
		t.Fatalf("after Settle(MaxInt): status %d, fields %+v (%v), Retry-After %q; want 429, Remaining 0, positive reset and wait", rec.Code, f, err, ra)
	}
}

// TestAllowAtMostFindsWhatFitsAcrossRules: four rules with 9, 8, 7 and 6
// units left, the rule with more left having the longer wait: AllowAtMost
// grants the 6 the tightest rule has left.
func TestAllowAtMostFindsWhatFitsAcrossRules(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "day", Limit: ratelimit.PerDay(19), Key: ratelimit.Global()},
		{Name: "hour", Limit: ratelimit.PerHour(18), Key: ratelimit.Global()},
		{Name: "minute", Limit: ratelimit.PerMinute(17), Key: ratelimit.Global()},
		{Name: "second", Limit: ratelimit.PerSecond(16), Key: ratelimit.Global()},
	}, ratelimit.WithClock(clock), ratelimit.WithStore(memory.New(memory.WithClock(clock))))
	if res, err := l.AllowN(context.Background(), "k", 10); err != nil || !res.Allowed {
		t.Fatalf("setup: %+v, %v", res, err)
	}
	if granted, res, err := l.AllowAtMost(context.Background(), "k", 10); err != nil || granted != 6 {
		t.Fatalf("AllowAtMost(10) with 9, 8, 7 and 6 left = %d, %+v, %v; want 6", granted, res, err)
	}
}

// TestSettlementRefundWhileTheKeyIsInDebt: two requests of a settled GCRA
// rule (no pacing) are served at once, estimate 5 each. The first reports
// 200, which puts the key in debt; the second reports 1, so 4 of its 5
// units are given back. 201 units were used in all: the key's debt is that
// of 201 units, not 205 (the refund is not lost because the key's time is
// beyond its burst).
func TestSettlementRefundWhileTheKeyIsInDebt(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	limit := ratelimit.PerHour(100) // interval 36s, burst 100
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: limit, Key: ratelimit.Global(), Settled: true, Cost: func(*http.Request) int { return 5 }}}, ratelimit.WithClock(clock), ratelimit.WithStore(memory.New(memory.WithClock(clock))))
	r := httptest.NewRequest("GET", "/", nil)
	a, b := l.Check(r), l.Check(r)
	if !a.Allowed() || !b.Allowed() {
		t.Fatal("setup: both requests should be admitted")
	}
	ratelimit.Settle(a.Context(r.Context()), nil, 200)
	a.Done()
	ratelimit.Settle(b.Context(r.Context()), nil, 1)
	b.Done()
	res, err := l.AllowN(context.Background(), "global", 1)
	// 201 units charged on a burst of 100: the next unit fits after 102
	// intervals.
	if want := 102 * 36 * time.Second; err != nil || res.Allowed || res.RetryAfter != want {
		t.Fatalf("after settlements of 200 and 1 (estimates 5 and 5): %+v, %v; want denied with RetryAfter %v (%v: the refund of 4 was lost)",
			res, err, want, res.RetryAfter-want)
	}
}

// TestSettledRequestIsNeverFree: a settled cost below one counts as one,
// as an admission's does, so a rule bounds the requests it admits whatever
// they settle: under PerMinute(10) with an estimate of 1, 100 requests
// that each settle 0 (an LLM call that failed before producing a token)
// are not all admitted, 10 are. Before, Settle(r.Context(), w, 0) gave the whole
// estimate back and all 100 passed.
func TestSettledRequestIsNeverFree(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	h := settling(ratelimit.PerMinute(10), 1, nil, ratelimit.WithClock(clock))
	admitted := 0
	for range 100 {
		if code, _, _ := serve(h, actual(0)); code == http.StatusOK {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("%d of 100 requests settling 0 admitted under PerMinute(10); want 10: a request costs at least one unit", admitted)
	}
}

// TestSettlementBelowOneCountsAsOne: a handler that reports a negative or
// zero cost (a bug, a refund it should not claim, or no work done) is
// settled at one unit: the rest of its estimate is given back, never more.
func TestSettlementBelowOneCountsAsOne(t *testing.T) {
	for _, a := range []int{0, -50} {
		clock := ratelimittest.NewClock(ratelimittest.Epoch())
		h := settling(ratelimit.PerHour(100), 3, nil, ratelimit.WithClock(clock))
		serve(h, actual(10)) // 10 charged
		serve(h, actual(a))  // 1 charged: 2 of its estimate of 3 given back
		if got := probeRemaining(t, h); got != 100-10-1-3 {
			t.Fatalf("after settlements of 10 and %d (estimates 3): Remaining %d after the probe (estimate 3); want 86", a, got)
		}
	}
}

// TestSettlementOfTheEstimateCallsNoStore: a handler that settles its
// estimate leaves the store alone after the admission's one Take; one that
// settles more calls it once more (a forced Take), one that settles less
// once (a Return).
func TestSettlementOfTheEstimateCallsNoStore(t *testing.T) {
	for _, c := range []struct {
		actual                int
		takes, returns, wantR int
	}{{5, 1, 0, 95}, {8, 2, 0, 92}, {2, 1, 1, 98}} {
		clock := ratelimittest.NewClock(ratelimittest.Epoch())
		cs := &ratelimittest.CountingStore{Store: memory.New(memory.WithClock(clock))}
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true,
			Cost: func(*http.Request) int { return 5 }, Store: cs}}, ratelimit.WithClock(clock))
		l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ratelimit.Settle(r.Context(), w, c.actual)
		})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		if cs.Takes.Load() != int64(c.takes) || cs.Returns.Load() != int64(c.returns) {
			t.Errorf("settling %d of 5: %d Take and %d Return calls; want %d and %d",
				c.actual, cs.Takes.Load(), cs.Returns.Load(), c.takes, c.returns)
		}
		if res, _ := l.AllowN(context.Background(), "global", 0); res.Remaining != c.wantR {
			t.Errorf("settling %d of 5: Remaining %d; want %d", c.actual, res.Remaining, c.wantR)
		}
	}
}

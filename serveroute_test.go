package ratelimit_test

import (
	"errors"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// routeCalls is what ServeRoute's callbacks saw for one request.
type routeCalls struct {
	denied   *ratelimit.Verdict // deny's verdict
	storeErr error              // onError's error
	next     *http.Request      // next's request
	nexts    int                // calls of next
}

// serveRoute runs l.ServeRoute on a request to path, with deny and
// onError returning denyErr and storeErr when not nil and next returning
// nil, and records what they saw in rt.
func (rt *routeCalls) serveRoute(l *ratelimit.Limiter, w http.ResponseWriter, deny, onError bool, denyErr, storeErr error) (bool, error) {
	var d func(*ratelimit.Verdict) error
	if deny {
		d = func(v *ratelimit.Verdict) error { rt.denied = v; return denyErr }
	}
	var e func(error) error
	if onError {
		e = func(err error) error { rt.storeErr = err; return storeErr }
	}
	return l.ServeRoute(w, ratelimittest.NewRequest("GET", "/", ""), "", d, e, func(r *http.Request) error {
		rt.next = r
		rt.nexts++
		return nil
	})
}

// TestServeRouteDenyGetsTheVerdictAndFields: deny answers a denied request
// with the rate-limit fields, Retry-After and Cache-Control already on the
// header and nothing written; its error is returned and next is not
// called. An admitted request is served by next.
func TestServeRouteDenyGetsTheVerdictAndFields(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.Global(), ratelimit.WithName("one"), ratelimit.WithClock(newClock()))
	errRendered := errors.New("rendered by the framework")
	var rt routeCalls
	w := ratelimittest.NewDiscardWriter()
	if served, err := rt.serveRoute(l, w, true, false, errRendered, nil); !served || err != nil || rt.nexts != 1 || rt.denied != nil {
		t.Fatalf("first request: served %v, err %v, next called %d times, deny got %v; want it served", served, err, rt.nexts, rt.denied)
	}
	if got := w.Header().Get("RateLimit"); got != `"one";r=0;t=60` {
		t.Fatalf("admitted request's RateLimit %q", got)
	}
	w.Reset()
	served, err := rt.serveRoute(l, w, true, false, errRendered, nil)
	if served || err != errRendered || rt.nexts != 1 {
		t.Fatalf("denied request: served %v, err %v, next called %d times; want deny's error and no next", served, err, rt.nexts)
	}
	v := rt.denied
	if v == nil || !v.Denied() || v.Rule() != "one" || v.Result().Allowed || !slices.Equal(v.Violated(), []string{"one"}) {
		t.Fatalf("deny got %+v", v)
	}
	h := w.Header()
	if h.Get("RateLimit") != `"one";r=0;t=60` || h.Get("Retry-After") != "60" || h.Get("Cache-Control") != "no-store" || h.Get("Content-Type") != "" {
		t.Fatalf("denial header %v: want the fields, Retry-After and Cache-Control, no problem body's type", h)
	}
	if w.Code != 0 {
		t.Fatalf("ServeRoute wrote status %d: the response is deny's", w.Code)
	}

	// Without deny, the core answers.
	w.Reset()
	if served, err := rt.serveRoute(l, w, false, false, nil, nil); served || err != nil || w.Code != http.StatusTooManyRequests || rt.nexts != 1 {
		t.Fatalf("without deny: served %v, err %v, status %d; want the core's 429", served, err, w.Code)
	}
}

// TestServeRouteDenyMayWriteTheCoresResponse: a deny callback that falls
// back to the verdict's Write sends what ServeRoute sends without deny,
// each field once (deny ran with them set already).
func TestServeRouteDenyMayWriteTheCoresResponse(t *testing.T) {
	var answers [2]*ratelimittest.DiscardWriter
	for i, deny := range []func(w http.ResponseWriter) func(*ratelimit.Verdict) error{
		func(http.ResponseWriter) func(*ratelimit.Verdict) error { return nil },
		func(w http.ResponseWriter) func(*ratelimit.Verdict) error {
			return func(v *ratelimit.Verdict) error { v.Write(w); return nil }
		},
	} {
		l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.Global(), ratelimit.WithName("one"), ratelimit.WithClock(newClock()))
		for range 2 {
			answers[i] = ratelimittest.NewDiscardWriter()
			l.ServeRoute(answers[i], ratelimittest.NewRequest("GET", "/", ""), "", deny(answers[i]), nil, func(*http.Request) error { return nil })
		}
	}
	def, got := answers[0], answers[1]
	if got.Code != http.StatusTooManyRequests || !reflect.DeepEqual(got.Header(), def.Header()) {
		t.Errorf("deny's Write: %d %v\nwant the core's: %d %v", got.Code, got.Header(), def.Code, def.Header())
	}
}

// TestServeRouteErrorHandlerLetsAFailedClosedRequestThrough: onError gets
// the store's error; returning nil serves a request its rule's fail closed
// would stop, without rate-limit fields.
func TestServeRouteErrorHandlerLetsAFailedClosedRequestThrough(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerMinute(1), Key: ratelimit.Global(), OnStoreError: ratelimit.FailurePolicy{Status: 503}}}, ratelimit.WithStore(failingStore))
	var rt routeCalls
	w := ratelimittest.NewDiscardWriter()
	served, err := rt.serveRoute(l, w, false, true, nil, nil)
	if !served || err != nil || rt.nexts != 1 {
		t.Fatalf("served %v, err %v, next called %d times; want the request let through", served, err, rt.nexts)
	}
	if !errors.Is(rt.storeErr, ratelimit.ErrStoreUnavailable) || !errors.Is(rt.storeErr, errDown) {
		t.Fatalf("onError got %v, want the store's error wrapping ErrStoreUnavailable", rt.storeErr)
	}
	if w.Code != 0 || len(w.Header()) != 0 {
		t.Fatalf("status %d, header %v: want nothing written", w.Code, w.Header())
	}
}

// TestServeRouteErrorHandlerStopsAndReleases: onError's error stops a
// request admitted under fail open: nothing is written, next is not called
// and the Concurrency slot it took on a healthy rule is given back.
func TestServeRouteErrorHandlerStopsAndReleases(t *testing.T) {
	clock := newClock()
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "failing", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: failingStore},
		{Name: "inflight", Limit: ratelimit.Limit{Rate: 1, Period: time.Minute}, Key: ratelimit.Global(),
			Algorithm: ratelimit.Concurrency, Store: memory.New(memory.WithClock(clock))},
	}, ratelimit.WithClock(clock))
	errClosed := errors.New("fail closed")
	var rt routeCalls
	w := ratelimittest.NewDiscardWriter()
	served, err := rt.serveRoute(l, w, false, true, nil, errClosed)
	if served || err != errClosed || rt.nexts != 0 {
		t.Fatalf("served %v, err %v, next called %d times; want onError's error", served, err, rt.nexts)
	}
	if w.Code != 0 || len(w.Header()) != 0 {
		t.Fatalf("status %d, header %v: want nothing written", w.Code, w.Header())
	}
	// The slot is free: with onError letting store failures through, the
	// next request is admitted by the Concurrency rule.
	if served, err := rt.serveRoute(l, w, false, true, nil, nil); !served || err != nil {
		t.Fatalf("after the stopped request: served %v, err %v; its slot was not given back", served, err)
	}
}

// TestServeRouteErrorHandlerLetsNoDenialThrough: a request that one rule
// denies while another's store failed open is answered with the 429 when
// onError returns nil; only a request its store failure stopped is let
// through.
func TestServeRouteErrorHandlerLetsNoDenialThrough(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		// Local, the failing store is asked first, as the denying one is.
		{Name: "failing", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: localFailing{failingStore}},
		{Name: "one", Limit: ratelimit.PerMinute(1), Key: ratelimit.Global()},
	}, ratelimit.WithClock(newClock()))
	var rt routeCalls
	w := ratelimittest.NewDiscardWriter()
	rt.serveRoute(l, w, false, true, nil, nil)
	w.Reset()
	rt.storeErr = nil
	served, err := rt.serveRoute(l, w, false, true, nil, nil)
	if served || err != nil || rt.nexts != 1 || w.Code != http.StatusTooManyRequests {
		t.Fatalf("served %v, err %v, status %d, next called %d times; want the 429 and next called once", served, err, w.Code, rt.nexts)
	}
	if !errors.Is(rt.storeErr, errDown) {
		t.Fatalf("onError got %v", rt.storeErr)
	}
}

// TestServeRouteHandlerSettles: under a settling limiter next gets a
// request whose context reaches Settle, and the settled cost is charged;
// otherwise it gets the request itself.
func TestServeRouteHandlerSettles(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true}}, ratelimit.WithClock(newClock()))
	r := ratelimittest.NewRequest("GET", "/", "")
	settled := false
	if served, err := l.ServeRoute(ratelimittest.NewDiscardWriter(), r, "", nil, nil, func(r *http.Request) error {
		settled = ratelimit.Settle(r.Context(), nil, 10)
		return nil
	}); !served || err != nil || !settled {
		t.Fatalf("served %v, err %v, Settle %v: want Settle to reach the limiter", served, err, settled)
	}
	w := ratelimittest.NewDiscardWriter()
	var rt routeCalls
	rt.serveRoute(l, w, false, false, nil, nil)
	if f, err := ratelimittest.ParseRateLimit(w.Header()); err != nil || f.Remaining != 100-10-1 {
		t.Fatalf("next request's RateLimit %+v, %v: want Remaining 89 (the first charged 10)", f, err)
	}

	plain := ratelimit.NewLimiter(ratelimit.PerHour(100), ratelimit.Global())
	var got *http.Request
	plain.ServeRoute(ratelimittest.NewDiscardWriter(), r, "", nil, nil, func(r *http.Request) error { got = r; return nil })
	if got != r {
		t.Fatal("a limiter that does not settle gave next another request")
	}
}

// TestServeRouteDoneGivesTheSlotsBack: a Concurrency slot is held while
// next runs and given back, once, when it returns or panics.
func TestServeRouteDoneGivesTheSlotsBack(t *testing.T) {
	l := concurrencyLimiter(newClock(), 2)
	for i := range 2 {
		if n := freeSlots(l); n != 2 {
			t.Fatalf("round %d: %d requests admitted one inside another, want 2", i, n)
		}
	}
	inside := 0
	serveGet(l, func(*http.Request) error { inside = freeSlots(l); return nil })
	if inside != 1 {
		t.Fatalf("while a request is served: %d more admitted, want 1", inside)
	}
	func() {
		defer func() { recover() }()
		serveGet(l, func(*http.Request) error { panic("handler") })
	}()
	if n := freeSlots(l); n != 2 {
		t.Fatalf("after a handler panicked: %d admitted, want 2", n)
	}
}

// freeSlots counts the requests l admits one inside another's next until
// one is denied.
func freeSlots(l *ratelimit.Limiter) int {
	n := 0
	var nest func(*http.Request) error
	nest = func(*http.Request) error {
		n++
		serveGet(l, nest)
		return nil
	}
	serveGet(l, nest)
	return n
}

// serveGet serves a GET request to / through l.ServeRoute with next and
// reports whether next was called.
func serveGet(l *ratelimit.Limiter, next func(*http.Request) error) bool {
	served, _ := l.ServeRoute(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", ""), "", nil, nil, next)
	return served
}

// TestServeRouteCallbacksDoNotAllocate: closures given to ServeRoute cost
// no allocation: an admitted request with all three allocates as much as
// CheckRoute, Write and Done by hand.
func TestServeRouteCallbacksDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: allocation counts say nothing")
	}
	l := ratelimit.NewLimiter(ratelimit.PerSecond(1e9), ratelimit.ByIP())
	r := ratelimittest.NewRequest("GET", "/x", "192.0.2.1:1")
	w := ratelimittest.NewDiscardWriter()
	calls := 0
	withCallbacks := testing.AllocsPerRun(200, func() {
		w.Reset()
		l.ServeRoute(w, r, "/x",
			func(*ratelimit.Verdict) error { calls--; return nil },
			func(error) error { calls--; return nil },
			func(*http.Request) error { calls++; return nil })
	})
	byHand := testing.AllocsPerRun(200, func() {
		w.Reset()
		v := l.CheckRoute(r, "/x")
		v.Write(w)
		calls++
		v.Done()
	})
	if calls != 2*201 {
		t.Fatalf("next ran %d times in all, want %d", calls, 2*201)
	}
	if withCallbacks > byHand {
		t.Fatalf("ServeRoute with callbacks: %.1f allocations, by hand: %.1f", withCallbacks, byHand)
	}
}

// TestServeRouteLetThroughKeepsTheAdaptiveLimit: with an adaptive rule of 1
// beside a rule whose store is down under fail closed, onError returning nil
// lets each request through. The adaptive rule has no store and did admit
// the request, yet its slot is given back before next runs: a second
// request arriving while the first is in the handler is let through too,
// 2 in flight under a limit of 1. During a store outage with an error
// handler that lets requests through (echo's ErrorHandler returning nil),
// the adaptive overload protection is off.
func TestServeRouteLetThroughKeepsTheAdaptiveLimit(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.Global(), Adaptive: fixedAdaptive(1)},
		{Name: "failing", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: failingStore,
			OnStoreError: ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable}},
	})
	letThrough := func(error) error { return nil }
	inner := 0
	outerServed, _ := l.ServeRoute(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", ""), "/", nil, letThrough,
		func(*http.Request) error {
			if st := l.Adaptive("inflight"); len(st) != 1 || st[0].InFlight != 1 {
				t.Errorf("while the first request is served: adaptive state %+v, want 1 in flight", st)
			}
			w := ratelimittest.NewDiscardWriter()
			served, _ := l.ServeRoute(w, ratelimittest.NewRequest("GET", "/", ""), "/", nil, letThrough, func(*http.Request) error {
				inner++
				return nil
			})
			if served || inner != 0 || w.Code != http.StatusServiceUnavailable {
				t.Errorf("a second request while the first is served: served %v (status %d); want the adaptive rule's 503", served, w.Code)
			}
			return nil
		})
	if !outerServed {
		t.Fatal("setup: the first request was not let through")
	}
}

// TestServeRouteLetThroughCountsUnderTheHealthyRules: a rule on a healthy
// memory store allows 2 a minute; a second rule's store is down under
// fail closed, and onError returning nil lets each request through. The
// healthy rule's unit is given back (compensated) for every request, as
// for a stopped one, though next serves it: during the outage the healthy
// limit is not enforced at all (5 of 5 served), where fail open would have
// served 2.
func TestServeRouteLetThroughCountsUnderTheHealthyRules(t *testing.T) {
	clock := newClock()
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "local", Limit: ratelimit.PerMinute(2), Key: ratelimit.Global(), Store: memory.New(memory.WithClock(clock))},
		{Name: "failing", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: failingStore,
			OnStoreError: ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable}},
	}, ratelimit.WithClock(clock))
	served := 0
	for range 5 {
		ok, _ := l.ServeRoute(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", ""), "/", nil,
			func(error) error { return nil }, func(*http.Request) error { return nil })
		if ok {
			served++
		}
	}
	if served != 2 {
		t.Fatalf("%d of 5 requests served under a healthy rule of 2 a minute while another rule's store is down; want 2", served)
	}
}

// TestServeRouteErrorHandlerStopIsNotSampled: a request admitted under
// fail open that onError stops (fail closed) never ran: its adaptive slot
// must come back unsampled, as for a request another rule stopped. It was
// released as served with status 0 and an elapsed time of nearly nothing,
// a success under DefaultClassify: during a store outage with an error
// handler that fails closed, every request pulls the minimum RTT down to
// the cost of a failed store call.
func TestServeRouteErrorHandlerStopIsNotSampled(t *testing.T) {
	var seen []int
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.Global(), Adaptive: classifyRecorder(1, &seen)},
		{Name: "failing", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: failingStore},
	})
	errClosed := errors.New("fail closed")
	served, err := l.ServeRoute(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", ""), "/", nil,
		func(error) error { return errClosed }, func(*http.Request) error {
			t.Fatal("next called for a request onError stopped")
			return nil
		})
	if served || err != errClosed {
		t.Fatalf("served %v, err %v; want onError's error", served, err)
	}
	if len(seen) != 0 {
		t.Fatalf("Classify saw statuses %v for a request that never ran; want it released unsampled", seen)
	}
	if st := l.Adaptive("inflight")[0]; st.InFlight != 0 {
		t.Fatalf("%d in flight after the request was stopped", st.InFlight)
	}
}

// classifyRecorder returns a fixed adaptive rule of n whose Classify
// records the statuses it is given.
func classifyRecorder(n int, seen *[]int) *adaptive.Config {
	cfg := fixedAdaptive(n)
	cfg.Classify = func(r *http.Request, status int, elapsed time.Duration) adaptive.Sample {
		*seen = append(*seen, status)
		return adaptive.DefaultClassify(r, status, elapsed)
	}
	return cfg
}

// TestServeRoutePanickingHandlerIsClassifiedAs500: ServeRoute (the gin,
// echo and chi request path) classifies a next that wrote 200 and then
// panicked as a 500, as Limiter.Handler does since the panicking-handler
// fix: otherwise a request that failed fast is sampled as a fast success
// through every adapter.
func TestServeRoutePanickingHandlerIsClassifiedAs500(t *testing.T) {
	var seen []int
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: classifyRecorder(1, &seen)}})
	w := ratelimittest.NewDiscardWriter() // reports its status, as gin's writer does
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("next's panic did not reach the caller")
			}
		}()
		l.ServeRoute(w, ratelimittest.NewRequest("GET", "/", ""), "/", nil, nil, func(r *http.Request) error {
			w.WriteHeader(http.StatusOK)
			panic("handler failed")
		})
	}()
	if len(seen) != 1 || seen[0] != http.StatusInternalServerError {
		t.Fatalf("classified statuses %v, want [500]", seen)
	}
	if st := l.Adaptive("inflight")[0]; st.InFlight != 0 {
		t.Fatalf("%d in flight after the request ended", st.InFlight)
	}
}

// TestServeRouteLetThroughDeniedByAHealthyRuleGoesToDeny: when onError lets
// through a request a fail closed store failure stopped and, decided again,
// a healthy rule denies it, the denial is rendered by deny (the framework's
// way), as any other denial is, not by the core's 429.
func TestServeRouteLetThroughDeniedByAHealthyRuleGoesToDeny(t *testing.T) {
	clock := newClock()
	// The failing store is asked first (both stores are remote, in rule
	// order), so the healthy rule answers only in the second decision.
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "failing", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: failingStore,
			OnStoreError: ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable}},
		{Name: "healthy", Limit: ratelimit.PerMinute(1), Key: ratelimit.Global(), Store: remoteLike{memory.New(memory.WithClock(clock))}},
	}, ratelimit.WithClock(clock))
	var denied []string
	deny := func(v *ratelimit.Verdict) error {
		denied = append(denied, v.Result().Limit.String())
		return nil
	}
	letThrough := func(error) error { return nil }
	for i, wantServed := range []bool{true, false} {
		w := ratelimittest.NewDiscardWriter()
		served, _ := l.ServeRoute(w, ratelimittest.NewRequest("GET", "/", ""), "/", deny, letThrough, func(*http.Request) error { return nil })
		if served != wantServed {
			t.Fatalf("request %d: served %v, want %v", i+1, served, wantServed)
		}
		if !wantServed && (len(denied) != 1 || w.Code != 0) {
			t.Fatalf("request %d: deny called for %v, status %d written; want deny called once and nothing written by the core", i+1, denied, w.Code)
		}
	}
}

// TestServeRouteDecidesEachRequestOnce: every store is asked once per
// request, whether the request is admitted, denied, let through by onError
// after a fail closed store failure, or stopped by it. A let-through request
// used to be decided twice (the healthy store asked twice and compensated
// once, the failing one asked twice); onError is now asked at the moment
// of the failure, in place of the rule's policy.
func TestServeRouteDecidesEachRequestOnce(t *testing.T) {
	errStop := errors.New("stop")
	for _, tc := range []struct {
		name         string
		fail, spent  bool
		onError      error
		served       bool
		healthyTakes int64 // the failing store, when there is one, is asked once
		returns      int64 // given back to the healthy store
	}{
		{name: "admitted", served: true, healthyTakes: 1},
		{name: "denied", spent: true, healthyTakes: 1},
		{name: "let through by onError", fail: true, served: true, healthyTakes: 1},
		{name: "stopped by onError", fail: true, onError: errStop, healthyTakes: 1, returns: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newClock()
			healthy, second := countedPair(clock, tc.fail)
			l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
				{Name: "healthy", Limit: ratelimit.PerMinute(2), Key: ratelimit.Global(), Store: healthy},
				{Name: "second", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: second,
					OnStoreError: ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable}},
			}, ratelimit.WithClock(clock))
			asked := 0
			serve := func() (bool, error) {
				return l.ServeRoute(ratelimittest.NewDiscardWriter(), ratelimittest.NewRequest("GET", "/", ""), "/", nil,
					func(error) error { asked++; return tc.onError }, func(*http.Request) error { return nil })
			}
			if tc.spent {
				for range 2 {
					if ok, err := serve(); !ok || err != nil {
						t.Fatalf("spending the healthy rule: served %v, %v", ok, err)
					}
				}
				for _, s := range []*ratelimittest.CountingStore{healthy, second} {
					s.Takes.Store(0)
					s.TakeAlls.Store(0)
				}
			}
			served, err := serve()
			if served != tc.served || err != tc.onError {
				t.Fatalf("served %v, err %v; want %v, %v", served, err, tc.served, tc.onError)
			}
			if want := map[bool]int{false: 0, true: 1}[tc.fail]; asked != want {
				t.Errorf("onError asked %d times, want %d", asked, want)
			}
			if got := healthy.Decisions(); got != tc.healthyTakes {
				t.Errorf("the healthy store was asked %d times, want %d", got, tc.healthyTakes)
			}
			if got := second.Decisions(); got > 1 {
				t.Errorf("the second store was asked %d times, want at most 1", got)
			}
			if got := healthy.Returns.Load() + second.Returns.Load(); got != tc.returns {
				t.Errorf("%d units given back, want %d", got, tc.returns)
			}
		})
	}
}

// TestServeRouteAllocatesAsHandler: ServeRoute, the adapters' one request
// path, runs the middleware's: an allowed request costs at most one
// allocation (its two field slices) and a denied one none, as through
// Handler (TestHotPathAllocations).
func TestServeRouteAllocatesAsHandler(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own: allocation counts say nothing")
	}
	next := func(*http.Request) error { return nil }
	for _, c := range allocCases {
		l := ratelimit.NewLimiter(c.limit, ratelimit.ByIP())
		reqs := make([]*http.Request, 100)
		for i := range reqs {
			reqs[i] = clientReq(i)
			l.ServeRoute(ratelimittest.NewDiscardWriter(), reqs[i], "/", nil, nil, next)
		}
		w := ratelimittest.NewDiscardWriter()
		i := 0
		got := testing.AllocsPerRun(2000, func() {
			w.Reset()
			l.ServeRoute(w, reqs[i%len(reqs)], "/", nil, nil, next)
			i++
		})
		if w.Status() != c.want {
			t.Fatalf("%s: status %d, want %d", c.name, w.Status(), c.want)
		}
		if got > c.max {
			t.Errorf("%s: %.1f allocations per request, want at most %.0f", c.name, got, c.max)
		}
	}
}

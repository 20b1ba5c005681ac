package ratelimit_test

import (
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestServeRouteLetThroughKeepsTheAdaptiveLimit: with an adaptive rule of 1
// beside a rule whose store is down under FailClosed, onError returning nil
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
			OnStoreError: ratelimit.FailClosed(http.StatusServiceUnavailable)},
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
// FailClosed, and onError returning nil lets each request through. The
// healthy rule's unit is given back (compensated) for every request, as
// for a stopped one, though next serves it: during the outage the healthy
// limit is not enforced at all (5 of 5 served), where FailOpen would have
// served 2.
func TestServeRouteLetThroughCountsUnderTheHealthyRules(t *testing.T) {
	clock := newClock()
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "local", Limit: ratelimit.PerMinute(2), Key: ratelimit.Global(), Store: memory.New(memory.WithClock(clock))},
		{Name: "failing", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Store: failingStore,
			OnStoreError: ratelimit.FailClosed(http.StatusServiceUnavailable)},
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

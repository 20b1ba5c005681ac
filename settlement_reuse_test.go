package ratelimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// settledEntries serve a request through l, on each entry point of the
// middleware: Handler and ServeRoute.
var settledEntries = []struct {
	name  string
	serve func(l *ratelimit.Limiter, next http.HandlerFunc, w http.ResponseWriter, r *http.Request)
}{
	{"Handler", func(l *ratelimit.Limiter, next http.HandlerFunc, w http.ResponseWriter, r *http.Request) {
		l.Handler(next).ServeHTTP(w, r)
	}},
	{"ServeRoute", func(l *ratelimit.Limiter, next http.HandlerFunc, w http.ResponseWriter, r *http.Request) {
		_, _ = l.ServeRoute(w, r, "/", nil, nil, func(r *http.Request) error { next(w, r); return nil })
	}},
}

// settledPaths build a single settled rule's limiter on the direct path
// (the memory store) and on the general one (a store it does not
// recognise).
var settledPaths = []struct {
	name string
	opt  func(ratelimit.Clock) ratelimit.Option
}{
	{"direct", func(c ratelimit.Clock) ratelimit.Option { return ratelimit.WithClock(c) }},
	{"general", generalPath},
}

// settledServe serves a request through one entry point of a limiter.
type settledServe func(next http.HandlerFunc, w http.ResponseWriter, r *http.Request)

// eachSettledPath runs test, as a subtest, on each path and entry point
// with a limiter of one settled rule ("tokens", perHour an hour, one
// global key).
func eachSettledPath(t *testing.T, perHour int, test func(t *testing.T, l *ratelimit.Limiter, serve settledServe)) {
	for _, path := range settledPaths {
		for _, entry := range settledEntries {
			t.Run(path.name+"/"+entry.name, func(t *testing.T) {
				clock := ratelimittest.NewClock(ratelimittest.Epoch())
				l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "tokens", Limit: ratelimit.PerHour(perHour),
					Key: ratelimit.Global(), Settled: true}}, ratelimit.WithClock(clock), path.opt(clock))
				test(t, l, func(next http.HandlerFunc, w http.ResponseWriter, r *http.Request) { entry.serve(l, next, w, r) })
			})
		}
	}
}

// TestLateSettleReachesNoOtherRequest: Settle with the writer and request
// of a request already served (a goroutine its handler left behind) reports
// false and changes nothing, while each later request, which may be
// admitted into what the served ones held, is charged exactly what it
// settled itself: on the direct path and the general one, through Handler
// and ServeRoute.
func TestLateSettleReachesNoOtherRequest(t *testing.T) {
	eachSettledPath(t, 1000, func(t *testing.T, l *ratelimit.Limiter, serve settledServe) {
		type call struct {
			w http.ResponseWriter
			r *http.Request
		}
		var served []call // the writers and requests of the requests served so far
		next := func(w http.ResponseWriter, r *http.Request) {
			if !ratelimit.Settle(r.Context(), w, 3) {
				t.Error("Settle in the handler found no rule to settle")
			}
			for i, c := range served {
				if ratelimit.Settle(c.r.Context(), c.w, 100) {
					t.Errorf("Settle with served request %d's writer and request reported a rule to settle", i)
				}
			}
			served = append(served, call{w, r})
		}
		const n = 8
		for range n {
			w := httptest.NewRecorder()
			serve(next, w, httptest.NewRequest("GET", "/", nil))
			if w.Code != http.StatusOK {
				t.Fatalf("status %d, want 200", w.Code)
			}
		}
		if res, _ := l.AllowN(context.Background(), "global", 0); res.Remaining != 1000-3*n {
			t.Fatalf("Remaining %d after %d requests that settled 3 each; want %d", res.Remaining, n, 1000-3*n)
		}
	})
}

// TestSettleFromLeftoverGoroutines: handlers leave goroutines behind that
// call Settle and read their request's context after the response, while
// other requests are served: under the race detector, nothing the late
// calls reach is reused by another request, and every served request is
// charged what its own handler settled.
func TestSettleFromLeftoverGoroutines(t *testing.T) {
	type key struct{}
	eachSettledPath(t, 10_000, func(t *testing.T, l *ratelimit.Limiter, serve settledServe) {
		var late sync.WaitGroup
		var lateSettled, lostValue sync.Once
		release := make(chan struct{})
		var served chan struct{} // closed once the request being served has been
		next := func(w http.ResponseWriter, r *http.Request) {
			ctx, served := r.Context(), served
			ratelimit.Settle(r.Context(), w, 2)
			late.Go(func() {
				<-served
				<-release
				if ratelimit.Settle(r.Context(), w, 500) {
					lateSettled.Do(func() { t.Error("a late Settle reported a rule to settle") })
				}
				if ctx.Value(key{}) != "mine" {
					lostValue.Do(func() { t.Error("a served request's context lost its parent's value") })
				}
			})
		}
		serveAll := func(n int) {
			for range n {
				r := httptest.NewRequest("GET", "/", nil)
				r = r.WithContext(context.WithValue(r.Context(), key{}, "mine"))
				served = make(chan struct{})
				serve(next, httptest.NewRecorder(), r)
				close(served)
			}
		}
		serveAll(50)
		close(release) // the leftover goroutines run while more requests are served
		serveAll(50)
		late.Wait()
		if res, _ := l.AllowN(context.Background(), "global", 0); res.Remaining != 10_000-2*100 {
			t.Fatalf("Remaining %d after 100 requests that settled 2 each; want %d", res.Remaining, 10_000-2*100)
		}
	})
}

// TestSettledHandlerPanicSettlesOnce: a handler that settles and then
// panics is charged what it settled, once, and a Settle with its context
// afterwards reports false: on the direct path and the general one,
// through Handler and ServeRoute.
func TestSettledHandlerPanicSettlesOnce(t *testing.T) {
	eachSettledPath(t, 1000, func(t *testing.T, l *ratelimit.Limiter, serve settledServe) {
		var (
			hw http.ResponseWriter
			hr *http.Request
		)
		next := func(w http.ResponseWriter, r *http.Request) {
			hw, hr = w, r
			ratelimit.Settle(r.Context(), w, 40)
			panic("handler failed")
		}
		func() {
			defer func() {
				if p := recover(); p != "handler failed" {
					t.Fatalf("recovered %v, want the handler's panic", p)
				}
			}()
			serve(next, httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}()
		if ratelimit.Settle(hr.Context(), hw, 7) {
			t.Error("Settle after the panicked request reported a rule to settle")
		}
		if res, _ := l.AllowN(context.Background(), "global", 0); res.Remaining != 1000-40 {
			t.Fatalf("Remaining %d after a request that settled 40 and panicked; want %d", res.Remaining, 1000-40)
		}
	})
}

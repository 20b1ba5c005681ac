package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/stores"
)

// decisionCalls counts the calls that decide a request on the general
// path: Take and TakeAll of the store it wraps.
type decisionCalls struct {
	Store
	calls atomic.Int64
}

func (s *decisionCalls) Take(ctx context.Context, req stores.Request) (stores.Result, error) {
	s.calls.Add(1)
	return s.Store.Take(ctx, req)
}

func (s *decisionCalls) TakeAll(ctx context.Context, reqs []stores.Request, res []stores.Result) error {
	s.calls.Add(1)
	return s.Store.TakeAll(ctx, reqs, res)
}

// TestEveryEntryPointDecidesOnTheDirectPath: on the in-process store,
// stacked rules (a rate and a daily quota, or two rates), a Concurrency
// rule and a settled rule decide every request on the direct path, one
// engine call prepared when the Limiter was built, whichever entry point
// the request comes through: Handler, Check, ServeRoute with or without
// callbacks, Allow. The rules' Store, swapped after the build for a
// wrapper that counts the general path's calls, is never asked; and each
// admitted request counts once: a rule of 3 admits 3 of 5 requests.
func TestEveryEntryPointDecidesOnTheDirectPath(t *testing.T) {
	clock := fixedClock{time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	three := Limit{Rate: 3, Period: time.Hour}
	configs := map[string]func() *Limiter{
		"rate+daily": func() *Limiter {
			return NewRulesLimiter([]Rule{{Name: "rate", Limit: three, Key: Global()},
				{Name: "daily", Quota: Daily(1000, time.UTC), Key: Global()}}, WithClock(clock))
		},
		"two rates": func() *Limiter {
			return NewRulesLimiter([]Rule{{Name: "rate", Limit: three, Key: Global()},
				{Name: "wide", Limit: PerMinute(1000), Key: Global()}}, WithClock(clock))
		},
		"concurrency": func() *Limiter {
			return NewRulesLimiter([]Rule{{Name: "inflight", Algorithm: Concurrency, Limit: three, Key: Global()}}, WithClock(clock))
		},
		"settled": func() *Limiter {
			return NewRulesLimiter([]Rule{{Name: "settled", Limit: three, Key: Global(), Settled: true}}, WithClock(clock))
		},
	}
	entries := map[string]func(l *Limiter, hold func()) bool{
		"Handler": func(l *Limiter, hold func()) bool {
			served := false
			l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true; hold() })).
				ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
			return served
		},
		"Check": func(l *Limiter, hold func()) bool {
			v := l.Check(httptest.NewRequest("GET", "/", nil))
			v.Write(httptest.NewRecorder())
			if v.Allowed() {
				hold()
				v.Done()
			}
			return v.Allowed()
		},
		"ServeRoute with deny": func(l *Limiter, hold func()) bool {
			served, _ := l.ServeRoute(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), "/",
				func(v *Verdict) error { return nil }, nil, func(*http.Request) error { hold(); return nil })
			return served
		},
		"ServeRoute with onError": func(l *Limiter, hold func()) bool {
			served, _ := l.ServeRoute(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), "/",
				nil, func(error) error { return nil }, func(*http.Request) error { hold(); return nil })
			return served
		},
		"ServeRoute": func(l *Limiter, hold func()) bool {
			served, _ := l.ServeRoute(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), "/",
				nil, nil, func(*http.Request) error { hold(); return nil })
			return served
		},
		"Allow": func(l *Limiter, hold func()) bool {
			res, err := l.Allow(context.Background(), "")
			if err != nil {
				t.Fatalf("Allow: %v", err)
			}
			if res.Allowed {
				hold() // Allow gives nothing back: a Concurrency slot stays taken
			}
			return res.Allowed
		},
	}
	for cname, build := range configs {
		for ename, serve := range entries {
			l := build()
			var calls []*decisionCalls
			for _, ru := range l.rules {
				c := &decisionCalls{Store: ru.Store}
				ru.Store, calls = c, append(calls, c)
			}
			// A Concurrency rule's requests are in flight together, each
			// serving the next from its handler.
			admitted, n := 0, 0
			var next func()
			next = func() {
				if n++; n > 5 {
					return
				}
				if cname != "concurrency" {
					if serve(l, func() {}) {
						admitted++
					}
					next()
					return
				}
				if !serve(l, func() { admitted++; next() }) {
					next()
				}
			}
			next()
			if admitted != 3 {
				t.Errorf("%s through %s: %d of 5 requests admitted under a rule of 3, want 3", cname, ename, admitted)
			}
			for i, c := range calls {
				if got := c.calls.Load(); got != 0 {
					t.Errorf("%s through %s: rule %q's store asked %d times: the general path decided", cname, ename, l.rules[i].Name, got)
				}
			}
		}
	}
}

package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

var errRDown = errors.New("redis down")

func serve(h http.Handler, r *http.Request) (code int, body string, panicked any) {
	defer func() { panicked = recover() }()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.String(), nil
}

// R1: a 62-character policy name fills the 72-byte header buffer exactly on a
// denial; formatting Retry-After then indexes fs.buf[72] and panics.
func TestRegressionHeaderBufferPanic(t *testing.T) {
	name := strings.Repeat("a", 62)
	h := ratelimit.New(ratelimit.PerSecond(1), ratelimit.ByIP(), ratelimit.WithName(name))(http.NotFoundHandler())
	for i := 1; i <= 2; i++ {
		code, _, p := serve(h, ratelimittest.NewRequest("GET", "/", ""))
		t.Logf("request %d: code=%d panic=%v", i, code, p)
		if p != nil {
			t.Errorf("request %d panicked: %v", i, p)
		}
	}
}

// R2: a shadow rule whose LimitFunc yields an invalid limit blocks traffic
// with a 500 (single rule) or writes a 500 in front of the real response.
func TestRegressionShadowRuleDenies(t *testing.T) {
	bad := func(*http.Request) (ratelimit.Limit, bool) { return ratelimit.Limit{}, true }
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("handler ran")) })
	single := ratelimit.NewRules([]ratelimit.Rule{{Name: "new", LimitFunc: bad, Key: ratelimit.ByIP(), Shadow: true}})(ok)
	code, body, _ := serve(single, ratelimittest.NewRequest("GET", "/", ""))
	t.Logf("single shadow rule: %d %q", code, body)
	if code != 200 {
		t.Errorf("shadow-only limiter answered %d", code)
	}
	multi := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "ip", Limit: ratelimit.PerMinute(10), Key: ratelimit.ByIP()},
		{Name: "new", LimitFunc: bad, Key: ratelimit.ByIP(), Shadow: true},
	})(ok)
	code, body, _ = serve(multi, ratelimittest.NewRequest("GET", "/", ""))
	t.Logf("enforced + shadow: %d %q", code, body)
	if code != 200 {
		t.Errorf("enforced+shadow limiter answered %d", code)
	}
}

// R3: FallbackTo + Concurrency: the slot is taken in the fallback store but
// released against the (failing) primary: fallback slots leak.
func TestRegressionFallbackConcurrencyLeak(t *testing.T) {
	fb := memory.New()
	var releaseErrs atomic.Int32
	obs := ratelimit.ObserverFunc(func(e ratelimit.Event) {
		if e.Outcome == ratelimit.OutcomeStoreError && e.Err != nil && strings.Contains(e.Err.Error(), "releasing") {
			releaseErrs.Add(1)
		}
	})
	h := ratelimit.New(ratelimit.Limit{Rate: 2, Period: time.Minute}, ratelimit.ByIP(),
		ratelimit.WithAlgorithm(ratelimit.Concurrency),
		ratelimit.WithStore(ratelimittest.FailingStore{Err: errRDown}),
		ratelimit.WithFailurePolicy(ratelimit.FallbackTo(fb)),
		ratelimit.WithObserver(obs))(http.NotFoundHandler())
	for i := 1; i <= 4; i++ { // sequential: at most one in flight
		code, _, _ := serve(h, ratelimittest.NewRequest("GET", "/", ""))
		t.Logf("sequential request %d: %d", i, code)
		if code == 429 {
			t.Errorf("request %d denied with nothing in flight (release errors: %d)", i, releaseErrs.Load())
		}
	}
}

// R4: two rules on a failing store with FallbackTo: a denial by one rule
// leaves the other's fallback consumption in place (not all-or-nothing).
func TestRegressionFallbackCompensation(t *testing.T) {
	fb := memory.New()
	primary := ratelimittest.FailingStore{Err: errRDown}
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "wide", Limit: ratelimit.PerHour(10), Key: ratelimit.ByIP(), OnStoreError: ratelimit.FallbackTo(fb)},
		{Name: "narrow", Limit: ratelimit.PerHour(1), Key: ratelimit.ByIP(), OnStoreError: ratelimit.FallbackTo(fb)},
	}, ratelimit.WithStore(primary))
	h := l.Handler(http.NotFoundHandler())
	for i := 0; i < 6; i++ {
		serve(h, ratelimittest.NewRequest("GET", "/", ""))
	}
	// 1 admitted, 5 denied by "narrow": "wide" should have 9 left.
	res, _ := fb.Take(context.Background(), ratelimit.Request{Rule: "wide", Key: "192.0.2.1", Limit: ratelimit.PerHour(10), Cost: 0})
	t.Logf("wide remaining in fallback after 1 admitted + 5 denied: %d (want 9)", res.Remaining)
	if res.Remaining != 9 {
		t.Errorf("denied requests consumed the other rule's fallback: remaining %d", res.Remaining)
	}
}

// toggle is a store that fails while down is set.
type toggle struct {
	ratelimit.Store
	down atomic.Bool
}

func (s *toggle) Take(ctx context.Context, r ratelimit.Request) (ratelimit.Result, error) {
	if s.down.Load() {
		return ratelimit.Result{}, errRDown
	}
	return s.Store.Take(ctx, r)
}
func (s *toggle) TakeAll(ctx context.Context, r []ratelimit.Request, res []ratelimit.Result) error {
	if s.down.Load() {
		return errRDown
	}
	return s.Store.TakeAll(ctx, r, res)
}
func (s *toggle) Return(ctx context.Context, r ratelimit.Request) error {
	if s.down.Load() {
		return errRDown
	}
	return s.Store.Return(ctx, r)
}

// R5: a Concurrency slot taken while the breaker was closed is never
// released if the breaker is open when the request finishes.
func TestRegressionBreakerLeaksSlots(t *testing.T) {
	clock := ratelimittest.NewClock(time.Time{})
	mem := memory.New(memory.WithClock(clock))
	st := &toggle{Store: mem}
	br := ratelimit.NewBreaker(st, ratelimit.BreakerConfig{Failures: 1, Cooldown: time.Second, Clock: clock})
	l := ratelimit.NewLimiter(ratelimit.Limit{Rate: 1, Period: time.Minute}, ratelimit.ByIP(),
		ratelimit.WithAlgorithm(ratelimit.Concurrency), ratelimit.WithStore(br))
	rec := httptest.NewRecorder()
	done, ok := l.Admit(rec, ratelimittest.NewRequest("GET", "/", ""))
	if !ok {
		t.Fatal("first request denied")
	}
	st.down.Store(true) // a blip while the request is in flight
	br.Take(context.Background(), ratelimit.Request{Key: "other", Limit: ratelimit.PerSecond(1), Cost: 1})
	st.down.Store(false) // Redis is back
	done()               // the request finishes: Return is refused (circuit open)
	clock.Advance(2 * time.Second)
	br.Take(context.Background(), ratelimit.Request{Key: "probe", Limit: ratelimit.PerSecond(1), Cost: 1}) // probe closes it
	t.Logf("breaker state: %v", br.State())
	code, _, _ := serve(l.Handler(http.NotFoundHandler()), ratelimittest.NewRequest("GET", "/", ""))
	t.Logf("next request, nothing in flight: %d", code)
	if code == 429 {
		t.Error("slot leaked: locked out for the slot's whole Period")
	}
}

// R6: a probe cancelled by its caller closes the circuit as if it had succeeded.
func TestRegressionBreakerCancelledProbeCloses(t *testing.T) {
	clock := ratelimittest.NewClock(time.Time{})
	var cancelledOnly atomic.Bool
	st := storeFn(func(ctx context.Context) error {
		if cancelledOnly.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return errRDown
	})
	br := ratelimit.NewBreaker(st, ratelimit.BreakerConfig{Failures: 1, Cooldown: time.Second, Clock: clock})
	req := ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1), Cost: 1}
	br.Take(context.Background(), req)
	t.Logf("after failure: %v", br.State())
	clock.Advance(2 * time.Second)
	cancelledOnly.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client went away during the probe; the store is still dead
	_, err := br.Take(ctx, req)
	t.Logf("probe err=%v; state now %v", err, br.State())
	if br.State() == ratelimit.BreakerClosed {
		t.Error("a cancelled probe closed the circuit; the store never answered")
	}
}

type storeFn func(ctx context.Context) error

func (f storeFn) Take(ctx context.Context, _ ratelimit.Request) (ratelimit.Result, error) {
	return ratelimit.Result{}, f(ctx)
}
func (f storeFn) TakeAll(ctx context.Context, _ []ratelimit.Request, _ []ratelimit.Result) error {
	return f(ctx)
}
func (f storeFn) Return(ctx context.Context, _ ratelimit.Request) error { return f(ctx) }

// R7: Allow on a limiter whose rules are all dynamic panics.
func TestRegressionAllowNoStaticRule(t *testing.T) {
	l := ratelimit.NewRulesLimiter(ratelimit.Tiers("api", ratelimit.ByIP(),
		func(*http.Request) (string, bool) { return "free", true },
		map[string]ratelimit.Plan{"free": {Rate: ratelimit.PerMinute(10)}}))
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("Allow panicked: %v", p)
		}
	}()
	res, err := l.Allow(context.Background(), "k")
	t.Logf("Allow: %+v %v", res, err)
}

// R8: a shadow Concurrency rule keeps its slot when an enforced rule denies.
func TestRegressionShadowSlotLeak(t *testing.T) {
	var shadowDenied atomic.Int32
	obs := ratelimit.ObserverFunc(func(e ratelimit.Event) {
		if e.Outcome == ratelimit.OutcomeShadowDenied {
			shadowDenied.Add(1)
		}
	})
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "ip", Limit: ratelimit.PerHour(1), Key: ratelimit.ByIP()},
		{Name: "inflight", Limit: ratelimit.Limit{Rate: 2, Period: time.Hour}, Algorithm: ratelimit.Concurrency, Key: ratelimit.ByIP(), Shadow: true},
	}, ratelimit.WithObserver(obs))(http.NotFoundHandler())
	for i := 0; i < 5; i++ { // sequential; never more than 1 in flight
		serve(h, ratelimittest.NewRequest("GET", "/", ""))
	}
	t.Logf("shadow-denied events with at most 1 request in flight: %d", shadowDenied.Load())
	if shadowDenied.Load() > 0 {
		t.Error("shadow concurrency slots leaked on denied requests")
	}
}

// R9: a Store wrapper that rewrites the request keeps validated=true, so the
// memory store skips validation: a divide by zero instead of ErrInvalidLimit.
type planStore struct{ ratelimit.Store }

func (p planStore) Take(ctx context.Context, r ratelimit.Request) (ratelimit.Result, error) {
	r.Limit = ratelimit.Limit{} // e.g. a per-tenant limit looked up and missing
	return p.Store.Take(ctx, r)
}

func TestRegressionValidatedFlagLeaks(t *testing.T) {
	h := ratelimit.New(ratelimit.PerSecond(5), ratelimit.ByIP(), ratelimit.WithStore(planStore{memory.New()}))(http.NotFoundHandler())
	code, body, p := serve(h, ratelimittest.NewRequest("GET", "/", ""))
	t.Logf("code=%d body=%q panic=%v", code, body, p)
	if p != nil {
		t.Errorf("store panicked instead of returning ErrInvalidLimit: %v", p)
	}
	// Direct call (validated=false) returns an error, for comparison.
	_, err := planStore{memory.New()}.Take(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(5), Cost: 1})
	t.Logf("same wrapper, unvalidated request: err=%v", err)
}

// R10: WithMaxKeys(n) with default shards evicts (resets) live, limited keys
// while the store holds far fewer than n keys.
func TestRegressionShardedEviction(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 1000
	s := memory.New(memory.WithMaxKeys(n))
	lim := ratelimit.PerHour(1)
	const keys = n / 2
	for i := 0; i < keys; i++ {
		s.TakeAt(now, ratelimit.Request{Key: fmt.Sprint("k", i), Limit: lim, Cost: 1})
	}
	reset := 0
	for i := 0; i < keys; i++ {
		if res, _ := s.TakeAt(now, ratelimit.Request{Key: fmt.Sprint("k", i), Limit: lim, Cost: 0}); res.Allowed {
			reset++
		}
	}
	t.Logf("WithMaxKeys(%d), %d live keys limited for an hour: %d were evicted and reset; Len=%d", n, keys, reset, s.Len())
	if reset > 0 {
		t.Errorf("%d limited keys reset with the store at %d%% of its bound", reset, 100*keys/n)
	}
}

package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	_ "time/tzdata"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func byPath(r *http.Request) (string, error) { return r.URL.Path, nil }

// remaining peeks at a rule's bucket without consuming.
func remaining(t *testing.T, s ratelimit.Store, rule, key string, l ratelimit.Limit) int {
	t.Helper()
	res, err := s.Take(context.Background(), stores.Request{Rule: rule, Key: key, Limit: l, Cost: 0})
	if err != nil {
		t.Fatal(err)
	}
	return res.Remaining
}

func TestRulesAllOrNothing(t *testing.T) {
	clock := newClock()
	store := memory.New(memory.WithClock(clock))
	wide, narrow := ratelimit.PerMinute(10), ratelimit.PerMinute(2)
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "ip", Limit: wide, Key: byPeer},
		{Name: "route", Limit: narrow, Key: byPath},
	}, ratelimit.WithStore(store), ratelimit.WithClock(clock))(ok)

	for i := 0; i < 2; i++ {
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/login", ""))
		if resp.Code != 200 {
			t.Fatalf("request %d: %d", i, resp.Code)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != `"ip";q=10;w=60, "route";q=2;w=60` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
	}
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/login", ""))
	if resp.Code != 429 || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"route";r=0;`) {
		t.Fatalf("third request: %d, RateLimit %q", resp.Code, resp.Header.Get("RateLimit"))
	}
	var problem struct {
		Violated []string `json:"violated-policies"`
	}
	json.Unmarshal([]byte(resp.Body), &problem)
	if len(problem.Violated) != 1 || problem.Violated[0] != "route" {
		t.Fatalf("violated-policies %v", problem.Violated)
	}
	if got := remaining(t, store, "ip", "192.0.2.1", wide); got != 8 {
		t.Fatalf("the ip rule consumed on a request the route rule denied: remaining %d, want 8", got)
	}
	// Another path from the same IP: route has 1 left of 2, ip 7 of 10.
	resp = ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/other", ""))
	if got := resp.Header.Get("RateLimit"); !strings.HasPrefix(got, `"route";r=1;`) {
		t.Fatalf("most restrictive of ip r=7 and route r=1: %q", got)
	}
}

func TestRulesAllOrNothingUnderLoad(t *testing.T) {
	store := memory.New(memory.WithClock(newClock()))
	big, small := ratelimit.PerHour(1000), ratelimit.PerHour(50)
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "big", Limit: big, Key: byPeer},
		{Name: "small", Limit: small, Key: byPeer},
	}, ratelimit.WithStore(store))(ok)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")).Code == 200 {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 50 {
		t.Fatalf("admitted %d of 200, want exactly 50", admitted.Load())
	}
	if got := remaining(t, store, "big", "192.0.2.1", big); got != 950 {
		t.Fatalf("big rule remaining %d, want 950: denied requests consumed", got)
	}
}

func TestRulesCheapFirstAndCompensation(t *testing.T) {
	clock := newClock()
	local := memory.New(memory.WithClock(clock))
	remote := &ratelimittest.CountingStore{Store: memory.New(memory.WithClock(clock))} // hides LocalStore
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "fleet", Limit: ratelimit.PerMinute(3), Key: byPath, Store: remote}, // listed first, checked second
		{Name: "local", Limit: ratelimit.PerMinute(5), Key: byPeer, Store: local},
	})(ok)
	for i := 0; i < 3; i++ {
		ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/a", ""))
	}
	// The remote rule denies /a: the local rule's unit is given back.
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/a", "")); resp.Code != 429 {
		t.Fatalf("fourth /a: %d", resp.Code)
	}
	if got := remaining(t, local, "local", "192.0.2.1", ratelimit.PerMinute(5)); got != 2 {
		t.Fatalf("local remaining %d, want 2 (compensated)", got)
	}
	// Exhaust the local rule: once it denies, the remote store is not asked.
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/b", ""))
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/c", ""))
	before := remote.Decisions()
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/d", "")); resp.Code != 429 {
		t.Fatalf("local limit: %d", resp.Code)
	}
	if remote.Decisions() != before {
		t.Fatal("a request the local rule denied still cost a remote call")
	}
}

func TestQuotaCalendarDay(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	// 2026-03-07 22:00 in New York; the next day has 23 hours (DST starts).
	clock := ratelimittest.NewClock(time.Date(2026, 3, 7, 22, 0, 0, 0, ny))
	h := ratelimit.NewRules([]ratelimit.Rule{{Name: "daily", Quota: ratelimit.Daily(2, ny), Key: byPeer}},
		ratelimit.WithClock(clock))(ok)
	get := func() *ratelimittest.Response { return ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")) }
	resp := get()
	if got := resp.Header.Get("RateLimit"); got != `"daily";r=1;t=7200` {
		t.Fatalf("two hours before local midnight: %q", got)
	}
	if got := resp.Header.Get("RateLimit-Policy"); got != `"daily";q=2;w=86400` {
		t.Fatalf("policy %q", got)
	}
	get()
	if resp := get(); resp.Code != 429 || resp.Header.Get("Retry-After") != "7200" {
		t.Fatalf("third request: %d, Retry-After %q", resp.Code, resp.Header.Get("Retry-After"))
	}
	clock.Advance(2 * time.Hour) // local midnight: a new day of 23 hours
	resp = get()
	if resp.Code != 200 || resp.Header.Get("RateLimit-Policy") != `"daily";q=2;w=82800` {
		t.Fatalf("after midnight: %d, policy %q", resp.Code, resp.Header.Get("RateLimit-Policy"))
	}
}

func TestQuotaWindows(t *testing.T) {
	at := time.Date(2026, 11, 22, 15, 4, 5, 0, time.UTC) // a Sunday
	cases := []struct {
		q          ratelimit.Quota
		start, end string
	}{
		{ratelimit.Daily(1, nil), "2026-11-22", "2026-11-23"},
		{ratelimit.Weekly(1, nil), "2026-11-16", "2026-11-23"},
		{ratelimit.Monthly(1, nil), "2026-11-01", "2026-12-01"},
		{ratelimit.Monthly(1, time.UTC), "2026-11-01", "2026-12-01"},
	}
	for _, c := range cases {
		s, e := c.q.Window(at)
		if s.Format(time.DateOnly) != c.start || e.Format(time.DateOnly) != c.end {
			t.Errorf("%+v: [%v, %v), want [%s, %s)", c.q, s, e, c.start, c.end)
		}
	}
}

func TestConcurrencyRule(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
	})
	store := memory.New()
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 2, Period: time.Minute}, Key: byPeer},
	}, ratelimit.WithStore(store))(slow)
	var wg sync.WaitGroup
	for _, p := range []string{"/a", "/panic"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { recover() }()
			ratelimittest.Do(h, ratelimittest.NewRequest("GET", p, ""))
		}()
	}
	<-entered
	<-entered
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/c", "")); resp.Code != 429 {
		t.Fatalf("third request in flight: %d", resp.Code)
	}
	close(release)
	wg.Wait()
	if got := remaining(t, store, "inflight", "192.0.2.1", ratelimit.Limit{Rate: 2, Period: time.Minute}); got != 2 {
		t.Fatalf("slots after both requests ended (one panicked): %d free, want 2", got)
	}
}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []ratelimit.Event
}

func (r *recorder) Observe(e ratelimit.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Request = nil
	r.events = append(r.events, e)
}

func (r *recorder) outcomes() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, e := range r.events {
		s = append(s, e.Rule+":"+e.Outcome.String())
	}
	return strings.Join(s, " ")
}

func TestShadowAndObserver(t *testing.T) {
	rec := &recorder{}
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "new-limit", Limit: ratelimit.PerMinute(1), Key: byPeer, Shadow: true, KeyKind: "ip"},
		{Name: "current", Limit: ratelimit.PerMinute(100), Key: byPeer, KeyKind: "ip"},
	}, ratelimit.WithObserver(rec), ratelimit.WithClock(newClock()))(ok)
	for i := 0; i < 3; i++ {
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
		if resp.Code != 200 || strings.Contains(resp.Header.Get("RateLimit-Policy"), "new-limit") {
			t.Fatalf("request %d: %d, policy %q: a shadow rule must neither deny nor show", i, resp.Code, resp.Header.Get("RateLimit-Policy"))
		}
	}
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/healthz", ""))
	want := "new-limit:allowed current:allowed new-limit:shadow_denied current:allowed new-limit:shadow_denied current:allowed :skipped"
	if got := rec.outcomes(); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	for _, e := range rec.events {
		if e.Outcome != ratelimit.OutcomeSkipped && e.KeyKind != "ip" {
			t.Fatalf("event without its key kind: %+v", e)
		}
	}
}

func TestFailurePolicies(t *testing.T) {
	cases := []struct {
		name   string
		policy ratelimit.FailurePolicy
		codes  []int
		events string
	}{
		{"open", ratelimit.FailurePolicy{}, []int{200, 200, 200}, "r:store_error r:store_error r:store_error"},
		{"closed-503", ratelimit.FailurePolicy{Status: 503}, []int{503, 503, 503}, "r:store_error r:store_error r:store_error"},
		{"closed-429", ratelimit.FailurePolicy{Status: 429}, []int{429, 429, 429}, "r:store_error r:store_error r:store_error"},
		{"fallback", ratelimit.FailurePolicy{Fallback: memory.New(memory.WithClock(newClock()))}, []int{200, 200, 429}, "r:fallback r:allowed r:fallback r:allowed r:fallback r:denied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			h := ratelimit.NewRules([]ratelimit.Rule{
				{Name: "r", Limit: ratelimit.PerMinute(2), Key: byPeer, Store: failingStore, OnStoreError: c.policy},
			}, ratelimit.WithObserver(rec))(ok)
			for i, want := range c.codes {
				resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
				if resp.Code != want {
					t.Fatalf("request %d: %d, want %d", i, resp.Code, want)
				}
				if want == 503 && !strings.Contains(resp.Body, "temporary-reduced-capacity") {
					t.Fatalf("fail-closed body %q", resp.Body)
				}
			}
			if got := rec.outcomes(); got != c.events {
				t.Fatalf("events %q, want %q", got, c.events)
			}
			for _, e := range rec.events {
				if e.Outcome != ratelimit.OutcomeStoreError && e.Outcome != ratelimit.OutcomeFallback {
					continue
				}
				if !errors.Is(e.Err, ratelimit.ErrStoreUnavailable) || !errors.Is(e.Err, errDown) {
					t.Fatalf("event error %v does not wrap the cause", e.Err)
				}
			}
		})
	}
}

// hangingStore never answers until the context ends, like a Redis that
// accepts connections but never replies.
type hangingStore struct{ ratelimittest.FailingStore }

func (hangingStore) Take(ctx context.Context, _ stores.Request) (ratelimit.Result, error) {
	<-ctx.Done()
	return ratelimit.Result{}, ctx.Err()
}

func TestTimeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := ratelimit.New(ratelimit.PerSecond(10), byPeer, ratelimit.WithStore(hangingStore{}),
			ratelimit.WithTimeout(50*time.Millisecond))(ok)
		start := time.Now()
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
		if took := time.Since(start); resp.Code != 200 || took != 50*time.Millisecond {
			t.Fatalf("hung store, fail open: status %d after %v, want 200 after exactly the 50ms budget", resp.Code, took)
		}
	})
}

func TestNewRulesConfigErrors(t *testing.T) {
	r := ratelimit.Rule{Name: "a", Limit: ratelimit.PerSecond(1), Key: byPeer}
	cases := map[string]func(){
		"rule option":     func() { ratelimit.NewRules([]ratelimit.Rule{r}, ratelimit.WithName("x")) },
		"duplicate names": func() { ratelimit.NewRules([]ratelimit.Rule{r, r}) },
		"no rules":        func() { ratelimit.NewRules(nil) },
		"too many rules":  func() { ratelimit.NewRules(make([]ratelimit.Rule, 17)) },
		"missing key":     func() { ratelimit.NewRules([]ratelimit.Rule{{Name: "a", Limit: ratelimit.PerSecond(1)}}) },
		"invalid limit":   func() { ratelimit.NewRules([]ratelimit.Rule{{Name: "a", Key: byPeer}}) },
		"bad quota":       func() { ratelimit.NewRules([]ratelimit.Rule{{Name: "a", Key: byPeer, Quota: ratelimit.Daily(0, nil)}}) },
		"bad fail status": func() {
			ratelimit.NewRules([]ratelimit.Rule{{Name: "a", Limit: ratelimit.PerSecond(1), Key: byPeer, OnStoreError: ratelimit.FailurePolicy{Status: 500}}})
		},
		"fail status and fallback": func() {
			ratelimit.NewRules([]ratelimit.Rule{{Name: "a", Limit: ratelimit.PerSecond(1), Key: byPeer, OnStoreError: ratelimit.FailurePolicy{Status: 503, Fallback: memory.New()}}})
		},
		"instances without fallback": func() {
			ratelimit.NewRules([]ratelimit.Rule{{Name: "a", Limit: ratelimit.PerSecond(1), Key: byPeer, OnStoreError: ratelimit.FailurePolicy{Instances: 8}}})
		},
		"negative instances": func() {
			ratelimit.NewRules([]ratelimit.Rule{{Name: "a", Limit: ratelimit.PerSecond(1), Key: byPeer, OnStoreError: ratelimit.FailurePolicy{Fallback: memory.New(), Instances: -1}}})
		},
		"key error 200":                  func() { ratelimit.OnKeyError(ratelimit.KeyErrorPolicy{Status: 200}) },
		"key error 600":                  func() { ratelimit.OnKeyError(ratelimit.KeyErrorPolicy{Status: 600}) },
		"shared key error with a status": func() { ratelimit.OnKeyError(ratelimit.KeyErrorPolicy{Shared: true, Status: 429}) },
		"negative timeout":               func() { ratelimit.WithTimeout(-1) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "ratelimit: ") {
					t.Fatalf("panic %v, want a ratelimit: message", r)
				}
			}()
			f()
		})
	}
}

func TestLimiterAllowSeveralRules(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "burst", Limit: ratelimit.PerMinute(5), Key: byPeer},
		{Name: "hourly", Limit: ratelimit.PerHour(3), Key: byPeer},
	}, ratelimit.WithClock(newClock()))
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if res, err := l.Allow(ctx, "alice"); err != nil || !res.Allowed {
			t.Fatalf("attempt %d: %+v %v", i, res, err)
		}
	}
	res, _ := l.Allow(ctx, "alice")
	if res.Allowed || res.Limit != ratelimit.PerHour(3) {
		t.Fatalf("fourth attempt: %+v, want a denial by the hourly rule", res)
	}
	if res, _ := l.AllowN(ctx, "alice", 0); res.Remaining != 0 {
		t.Fatalf("most restrictive remaining: %+v", res)
	}
}

func TestObserverLatency(t *testing.T) {
	rec := &recorder{}
	h := ratelimit.New(ratelimit.PerMinute(1), byPeer, ratelimit.WithObserver(ratelimit.ObserverFunc(func(e ratelimit.Event) {
		if e.Latency <= 0 {
			t.Errorf("%s event without latency", e.Outcome)
		}
		rec.Observe(e)
	})))(ok)
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	if got := rec.outcomes(); got != "key-1-per-1m:allowed key-1-per-1m:denied" {
		t.Fatalf("events %q", got)
	}
}

func TestShadowRuleKeyErrorNeverDenies(t *testing.T) {
	rec := &recorder{}
	noKey := func(*http.Request) (string, error) { return "", ratelimit.ErrNoKey }
	single := ratelimit.NewRules([]ratelimit.Rule{
		{Limit: ratelimit.PerMinute(1), Key: noKey, Shadow: true},
	}, ratelimit.WithObserver(rec))(ok)
	multi := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "shadow", Limit: ratelimit.PerMinute(1), Key: noKey, Shadow: true},
		{Name: "ip", Limit: ratelimit.PerMinute(10), Key: byPeer},
	}, ratelimit.WithObserver(rec))(ok)
	for _, h := range []http.Handler{single, multi} {
		if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")); resp.Code != 200 {
			t.Fatalf("a shadow rule without a key denied: %d", resp.Code)
		}
	}
	if got := rec.outcomes(); got != "key-1-per-1m:key_error shadow:key_error ip:allowed" {
		t.Fatalf("events %q", got)
	}
}

func TestInvalidDynamicLimitIsServerError(t *testing.T) {
	h := ratelimit.NewRules([]ratelimit.Rule{{
		Name: "broken", Key: byPeer,
		LimitFunc: func(*http.Request) (ratelimit.Limit, bool) { return ratelimit.Limit{}, true },
	}})(ok)
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")); resp.Code != 500 {
		t.Fatalf("a LimitFunc returning a zero limit: %d, want 500 (never a bypass)", resp.Code)
	}
}

func TestMultiRuleAllocations(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	huge := ratelimit.Limit{Rate: 1e9, Period: time.Second}
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "global", Limit: huge, Key: ratelimit.Global()},
		{Name: "ip", Limit: huge, Key: ratelimit.ByIP()},
		{Name: "route", Limit: huge, Key: ratelimit.Keys(ratelimit.ByIP(), byPath)},
	})(next)
	req := ratelimittest.NewRequest("GET", "/api", "198.51.100.7:5555")
	w := ratelimittest.NewDiscardWriter()
	allocs := testing.AllocsPerRun(200, func() {
		w.Reset()
		h.ServeHTTP(w, req)
	})
	t.Logf("three rules, one store: %.1f allocs per request", allocs)
	// The response's fields and the route key; the rules' verdicts and the
	// store's batch stay off the heap.
	if w.Status() != 200 || allocs > 2 {
		t.Fatalf("status %d, %.1f allocs per request, want at most 2", w.Status(), allocs)
	}
}

func TestFallbackDividedAmongInstances(t *testing.T) {
	fallback := memory.New(memory.WithClock(newClock()))
	h := ratelimit.NewRules([]ratelimit.Rule{{
		Name: "fleet", Limit: ratelimit.PerMinute(100), Key: byPeer, Store: failingStore,
		OnStoreError: ratelimit.FailurePolicy{Fallback: fallback, Instances: 8},
	}})(ok)
	n, resp := ratelimittest.FirstLimited(h, 50, func() *http.Request { return ratelimittest.NewRequest("GET", "/", "") })
	if n != 13 || resp.Header.Get("RateLimit-Policy") != `"fleet";q=12;w=60` {
		t.Fatalf("a 100/min fleet limit over 8 instances: first 429 at %d (policy %q), want 13 (12 per instance)", n, resp.Header.Get("RateLimit-Policy"))
	}
	if got := (ratelimit.FailurePolicy{Fallback: fallback, Instances: 8}).String(); got != "fallback(1/8)" {
		t.Fatalf("String %q", got)
	}
}

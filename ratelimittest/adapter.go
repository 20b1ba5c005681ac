package ratelimittest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

// Adapter describes an HTTP framework adapter (for chi, gin, echo, ...) to
// TestAdapter: how to build the framework's router with a Limiter applied
// through the adapter. Its functions must be safe to call more than once;
// TestAdapter builds a fresh router in every subtest.
type Adapter struct {
	// Router returns the framework's router serving routes, each limited
	// by l through the adapter's middleware, placed where the adapter
	// documents that its ByRoute and its carve-outs see the route the
	// router matched (chi: r.Use inside r.Group; gin: r.Use; echo: e.Use).
	// A route serves its Method alone: TestAdapter expects HEAD to be
	// carved out only where a HEAD route serves it, as in routers that do
	// not answer HEAD from a GET route (chi, gin, echo). Router translates
	// the "{id}" parameter segments of the patterns to the framework's
	// syntax (":id" for gin and echo).
	Router func(l *ratelimit.Limiter, routes ...Route) http.Handler

	// ByRoute is the adapter's key function for the pattern of the route
	// the router matched. Nil skips the route-key checks, for a placement
	// where the route is not known yet (chi's top-level r.Use).
	ByRoute ratelimit.KeyFunc
}

// Route is one route of a router built by Adapter.Router.
type Route struct {
	Method  string       // the one method the route serves: "GET", "HEAD", "POST", ...
	Pattern string       // a path, with "{id}" for a parameter segment: "/users/{id}"
	Handler http.Handler // the route's handler
}

// TestAdapter runs the conformance suite every HTTP framework adapter must
// pass, on the routers a builds, observing only what a client sees
// (status, header fields, body) and which handlers ran:
//
//   - requests to one route pattern share a bucket when keyed by ByRoute
//     ("/users/1" and "/users/2"), other routes have their own, and
//     concurrent requests get exactly the quota of each; a rule keyed by
//     ByRoute reports the key kind "route" in its events;
//   - a denial is a 429 with the IETF RateLimit and RateLimit-Policy
//     fields, Retry-After and an RFC 9457 problem body, and the handler
//     does not run;
//   - a failing store fails open by default and answers 503 under
//     fail closed (503), without running the handler;
//   - a key error gets the key-error policy's status (400, or the one set
//     with OnKeyError(KeyErrorPolicy{Status: status})) without running the handler;
//   - WithSkip predicates let requests through without fields;
//   - Concurrency slots are held while the handler runs and released when
//     it returns or panics;
//   - carve-outs are decided from the route the router matched for the
//     request's method (docs/carve-outs.md): GET of a carve-out route is
//     skipped, HEAD only with a HEAD route, never a carve-out path served
//     by another route or method (CarveOutProber);
//   - status, fields and problem body are those the core middleware gives
//     on a ServeMux for the same sequence of requests;
//   - each request is decided once: one store call when it is admitted,
//     when it is denied and when its store fails and it is let through,
//     and one unit consumed on the in-process store.
//
// Every limiter reads time from a Clock that moves only when the suite
// moves it.
// quotaExceeded is the RFC 9457 problem type of a 429, registered by
// draft-ietf-httpapi-ratelimit-headers.
const quotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

func TestAdapter(t *testing.T, a Adapter) {
	t.Run("RouteKeysSharePatternBucket", a.testRouteKeys)
	t.Run("RouteKeyKindIsRoute", a.testRouteKeyKind)
	t.Run("ConcurrentRequestsGetExactQuota", a.testConcurrent)
	t.Run("DenialIsProblem429", a.testDenial)
	t.Run("StoreFailure", a.testStoreFailure)
	t.Run("KeyError", a.testKeyError)
	t.Run("Skip", a.testSkip)
	t.Run("ConcurrencySlotReleased", a.testConcurrency)
	t.Run("CarveOuts", a.testCarveOuts)
	t.Run("SameAsCore", a.testSameAsCore)
	t.Run("DecidesOnce", a.testDecidesOnce)
}

// handlers counts the calls of the handlers it makes.
type handlers struct{ calls atomic.Int64 }

// named returns a handler writing its name as body and ServedBy field.
func (hs *handlers) named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.calls.Add(1)
		w.Header().Set(ServedBy, name)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, name)
	})
}

// expectCalls fails t unless the handlers ran n times in all.
func (hs *handlers) expectCalls(t *testing.T, n int64, what string) {
	t.Helper()
	if got := hs.calls.Load(); got != n {
		t.Errorf("%s: handlers ran %d times, want %d", what, got, n)
	}
}

func still() ratelimit.Option { return ratelimit.WithClock(NewClock(Epoch())) }

func send(h http.Handler, method, target string, header ...string) *Response {
	return Do(h, NewRequest(method, target, "", header...))
}

func gets(target string) func() *http.Request {
	return func() *http.Request { return NewRequest(http.MethodGet, target, "") }
}

// routeKeyed returns a router serving GET routes of the patterns, limited
// to limit per client and route by ByRoute, and the handlers' counter; it
// skips the test when the placement has no ByRoute.
func (a Adapter) routeKeyed(t *testing.T, limit ratelimit.Limit, patterns ...string) (http.Handler, *handlers) {
	if a.ByRoute == nil {
		t.Skip("no ByRoute in this placement")
	}
	hs := new(handlers)
	var routes []Route
	for _, p := range patterns {
		routes = append(routes, Route{"GET", p, hs.named(p)})
	}
	return a.Router(ratelimit.NewLimiter(limit, ratelimit.Keys(ratelimit.ByIP(), a.ByRoute), still()), routes...), hs
}

// testRouteKeyKind: a rule keyed by the adapter's ByRoute alone reports
// the key kind "route" to observers (and so in metrics), as the core's
// ByRoute does, without the application naming it.
func (a Adapter) testRouteKeyKind(t *testing.T) {
	if a.ByRoute == nil {
		t.Skip("no ByRoute in this placement")
	}
	var mu sync.Mutex
	var kinds []string
	obs := ratelimit.WithObserver(ratelimit.ObserverFunc(func(e ratelimit.Event) {
		mu.Lock()
		kinds = append(kinds, e.KeyKind)
		mu.Unlock()
	}))
	hs := new(handlers)
	h := a.Router(ratelimit.NewLimiter(ratelimit.PerMinute(5), a.ByRoute, still(), obs), Route{"GET", "/users/{id}", hs.named("users")})
	if resp := send(h, "GET", "/users/1"); resp.Code != http.StatusOK {
		t.Fatalf("GET /users/1: %d %q", resp.Code, resp.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kinds) == 0 || kinds[0] != "route" {
		t.Fatalf("key kinds observed %q, want \"route\"", kinds)
	}
}

func (a Adapter) testRouteKeys(t *testing.T) {
	h, hs := a.routeKeyed(t, ratelimit.PerMinute(2), "/users/{id}", "/items/{id}")
	for i, target := range []string{"/users/1", "/users/2"} {
		if resp := send(h, "GET", target); resp.Code != http.StatusOK {
			t.Fatalf("request %d, %s: %d %q", i+1, target, resp.Code, resp.Body)
		}
	}
	if resp := send(h, "GET", "/users/3"); !resp.Limited() {
		t.Fatalf("GET /users/3 after /users/1 and /users/2: %d, want 429 (one bucket per route pattern)", resp.Code)
	}
	if resp := send(h, "GET", "/items/1"); resp.Code != http.StatusOK {
		t.Fatalf("GET /items/1: %d, want 200 (its own bucket)", resp.Code)
	}
	other := NewRequest("GET", "/users/1", "198.51.100.7:999")
	if resp := Do(h, other); resp.Code != http.StatusOK {
		t.Fatalf("GET /users/1 from another client: %d, want 200", resp.Code)
	}
	hs.expectCalls(t, 4, "admitted requests")
}

func (a Adapter) testConcurrent(t *testing.T) {
	h, _ := a.routeKeyed(t, ratelimit.PerMinute(50), "/a/{id}", "/b/{id}")
	var wg sync.WaitGroup
	var allowed [2]atomic.Int64
	for i := range 200 {
		wg.Go(func() {
			route := i % 2
			if Get(h, fmt.Sprintf("/%c/%d", 'a'+route, i)).Code == http.StatusOK {
				allowed[route].Add(1)
			}
		})
	}
	wg.Wait()
	if x, y := allowed[0].Load(), allowed[1].Load(); x != 50 || y != 50 {
		t.Errorf("200 concurrent requests to two routes: %d and %d admitted, want 50 each", x, y)
	}
}

func (a Adapter) testDenial(t *testing.T) {
	var hs handlers
	l := ratelimit.NewLimiter(ratelimit.PerMinute(2), ratelimit.ByIP(), ratelimit.WithName("conformance"), still())
	h := a.Router(l, Route{"GET", "/x", hs.named("/x")})
	first := send(h, "GET", "/x")
	if rl, err := ParseRateLimit(first.Header); err != nil || rl.Policy != "conformance" || rl.Remaining != 1 {
		t.Errorf("admitted request: RateLimit %+v, %v; want policy conformance with r=1", rl, err)
	}
	resp := ExpectLimitedAt(t, h, 2, gets("/x"))
	hs.expectCalls(t, 2, "two admitted requests and a denial")
	if resp.Header.Get(ServedBy) != "" {
		t.Errorf("the denial carries the handler's fields: %v", resp.Header)
	}
	checkDenial(t, resp, "conformance", 2, time.Minute)
}

// checkDenial checks a 429 by the policy name of quota per window.
func checkDenial(t *testing.T, resp *Response, name string, quota int, window time.Duration) {
	t.Helper()
	rl, err := ParseRateLimit(resp.Header)
	if err != nil || rl.Policy != name || rl.Remaining != 0 || rl.Reset <= 0 || rl.Reset > window {
		t.Errorf("RateLimit %+v, %v; want policy %q with r=0 and 0 < t <= %v", rl, err, name, window)
	}
	pols, err := ParsePolicies(resp.Header)
	if err != nil || len(pols) != 1 || pols[0].Name != name || pols[0].Quota != quota || pols[0].Window != window {
		t.Errorf("RateLimit-Policy %+v, %v; want %q;q=%d;w=%d", pols, err, name, quota, int(window.Seconds()))
	}
	var secs int
	if _, err := fmt.Sscanf(resp.Header.Get("Retry-After"), "%d", &secs); err != nil || secs < 1 || time.Duration(secs)*time.Second > window {
		t.Errorf("Retry-After %q; want whole seconds in [1, %v]", resp.Header.Get("Retry-After"), window)
	}
	p := checkProblem(t, resp, http.StatusTooManyRequests, quotaExceeded)
	if v, _ := p["violated-policies"].([]any); len(v) != 1 || v[0] != name {
		t.Errorf("problem body %q: violated-policies is not [%q]", resp.Body, name)
	}
}

// checkProblem checks that resp is an RFC 9457 problem of status, of type
// typ unless typ is empty, and returns its members.
func checkProblem(t *testing.T, resp *Response, status int, typ string) map[string]any {
	t.Helper()
	if resp.Code != status {
		t.Errorf("status %d, want %d", resp.Code, status)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", resp.Header.Get("Content-Type"))
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
		t.Errorf("problem body %q: %v", resp.Body, err)
		return nil
	}
	if got, _ := p["status"].(float64); int(got) != status {
		t.Errorf("problem body %q: status member is not %d", resp.Body, status)
	}
	if got, _ := p["type"].(string); typ != "" && got != typ {
		t.Errorf("problem body %q: type %q, want %q", resp.Body, got, typ)
	}
	return p
}

package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// byPeer keys requests by RemoteAddr's host, failing on an empty one.
func byPeer(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || host == "" {
		return "", fmt.Errorf("%w: peer %q", ratelimit.ErrNoKey, r.RemoteAddr)
	}
	return host, nil
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Write([]byte("ok"))
})

func newClock() *ratelimittest.Clock { return ratelimittest.NewClock(time.Time{}) }

func TestHeadersAndDenial(t *testing.T) {
	clock := newClock()
	h := ratelimit.New(ratelimit.PerMinute(3), byPeer, ratelimit.WithClock(clock))(ok)
	get := func() *ratelimittest.Response {
		return ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/api", ""))
	}

	steps := []struct {
		advance   time.Duration
		code      int
		rateLimit string
	}{
		{0, 200, `"key-3-per-1m";r=2;t=20`},
		{0, 200, `"key-3-per-1m";r=1;t=20`}, // t: one unit is back in 20 s, not the whole quota in 40
		{0, 200, `"key-3-per-1m";r=0;t=20`},
		{0, 429, `"key-3-per-1m";r=0;t=20`},
		{19 * time.Second, 429, `"key-3-per-1m";r=0;t=1`},
		{time.Second, 200, `"key-3-per-1m";r=0;t=20`},
		{90 * time.Second, 200, `"key-3-per-1m";r=2;t=20`},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		resp := get()
		if resp.Code != s.code {
			t.Fatalf("step %d: status %d, want %d", i, resp.Code, s.code)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != `"key-3-per-1m";q=3;w=60` {
			t.Fatalf("step %d: RateLimit-Policy %q", i, got)
		}
		if got := resp.Header.Get("RateLimit"); got != s.rateLimit {
			t.Fatalf("step %d: RateLimit %q, want %q", i, got, s.rateLimit)
		}
		if s.code == 200 {
			if resp.Header.Get("Retry-After") != "" || resp.Body != "ok" {
				t.Fatalf("step %d: allowed response has Retry-After %q, body %q", i, resp.Header.Get("Retry-After"), resp.Body)
			}
			continue
		}
		rl, err := ratelimittest.ParseRateLimit(resp.Header)
		if err != nil {
			t.Fatal(err)
		}
		if ra := resp.Header.Get("Retry-After"); ra != fmt.Sprint(int(rl.Reset/time.Second)) {
			t.Fatalf("step %d: Retry-After %q, t=%v: Retry-After must not be earlier than t", i, ra, rl.Reset)
		}
		if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("step %d: denial headers %v", i, resp.Header)
		}
		var problem struct {
			Type     string   `json:"type"`
			Status   int      `json:"status"`
			Violated []string `json:"violated-policies"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &problem); err != nil {
			t.Fatalf("step %d: body %q: %v", i, resp.Body, err)
		}
		if problem.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || problem.Status != 429 || len(problem.Violated) != 1 || problem.Violated[0] != "key-3-per-1m" {
			t.Fatalf("step %d: problem %+v", i, problem)
		}
	}
}

func TestPolicyFieldForBurst(t *testing.T) {
	h := ratelimit.New(ratelimit.PerSecond(10).WithBurst(50), byPeer, ratelimit.WithName("api"))(ok)
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	// 50 at once; an empty bucket refills in 5 seconds.
	if got := resp.Header.Get("RateLimit-Policy"); got != `"api";q=50;w=5` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
}

func TestKeyErrorPolicies(t *testing.T) {
	noPeer := func() *http.Request { return ratelimittest.NewRequest("GET", "/", "@") }

	h := ratelimit.New(ratelimit.PerHour(2), byPeer)(ok)
	resp := ratelimittest.Do(h, noPeer())
	if resp.Code != 400 || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(resp.Body, `"status":400`) {
		t.Fatalf("default key error: %d %v %q", resp.Code, resp.Header, resp.Body)
	}

	for _, p := range []ratelimit.KeyErrorPolicy{{}, ratelimit.KeyErrorPolicy{Status: 0}} {
		h = ratelimit.New(ratelimit.PerHour(2), byPeer, ratelimit.OnKeyError(p))(ok)
		if resp := ratelimittest.Do(h, noPeer()); resp.Code != 400 {
			t.Fatalf("KeyErrorPolicy %+v: status %d, want the default 400", p, resp.Code)
		}
	}

	h = ratelimit.New(ratelimit.PerHour(2), byPeer, ratelimit.OnKeyError(ratelimit.KeyErrorPolicy{Status: 401}))(ok)
	if resp := ratelimittest.Do(h, noPeer()); resp.Code != 401 {
		t.Fatalf("KeyErrorPolicy{Status: 401}: status %d", resp.Code)
	}

	h = ratelimit.New(ratelimit.PerHour(2), byPeer, ratelimit.OnKeyError(ratelimit.KeyErrorPolicy{Shared: true}), ratelimit.WithClock(newClock()))(ok)
	n, _ := ratelimittest.FirstLimited(h, 10, noPeer)
	if n != 3 {
		t.Fatalf("shared bucket for keyless requests: first 429 at %d, want 3", n)
	}
	// Clients with a key keep their own buckets.
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")); resp.Code != 200 {
		t.Fatalf("a keyed client was limited by the keyless bucket: %d", resp.Code)
	}
}

// TestKeyErrorProblemDetail: a key function's error that has a
// ProblemDetail method, however deeply wrapped, gives the detail of the
// problem body on every entry point's key-error response; any other error
// gives the generic one, and the detail is never taken from Error (which
// may hold what the client must not see).
func TestKeyErrorProblemDetail(t *testing.T) {
	const detail = "Send the tenant header."
	withDetail := func(*http.Request) (string, error) {
		return "", fmt.Errorf("outer: %w", detailedKeyError{detail})
	}
	plain := func(*http.Request) (string, error) {
		return "", fmt.Errorf("%w: secret internal reason", ratelimit.ErrNoKey)
	}
	for _, tc := range []struct {
		name string
		key  ratelimit.KeyFunc
		want string
	}{
		{"a detail", withDetail, detail},
		{"no detail", plain, "The request carries no usable rate-limit key."},
	} {
		for _, status := range []int{0, 401} {
			lim := ratelimit.NewLimiter(ratelimit.PerHour(2), tc.key, ratelimit.OnKeyError(ratelimit.KeyErrorPolicy{Status: status}))
			for name, h := range map[string]http.Handler{
				"Handler": lim.Handler(ok),
				"ServeRoute": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					lim.ServeRoute(w, r, "/", nil, nil, func(r *http.Request) error { ok.ServeHTTP(w, r); return nil })
				}),
			} {
				resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
				var problem struct {
					Status int
					Detail string
				}
				if err := json.Unmarshal([]byte(resp.Body), &problem); err != nil {
					t.Fatalf("%s, %s, status %d: body %q: %v", tc.name, name, status, resp.Body, err)
				}
				want := max(status, 400)
				if resp.Code != want || problem.Status != want || problem.Detail != tc.want {
					t.Fatalf("%s, %s: %d %+v; want %d with detail %q", tc.name, name, resp.Code, problem, want, tc.want)
				}
			}
		}
	}
}

// detailedKeyError is a key error with a detail for the client.
type detailedKeyError struct{ detail string }

func (e detailedKeyError) Error() string         { return "no tenant: " + e.detail }
func (e detailedKeyError) Unwrap() error         { return ratelimit.ErrNoKey }
func (e detailedKeyError) ProblemDetail() string { return e.detail }

func TestDeniedHandler(t *testing.T) {
	var got *ratelimit.Verdict
	denied := func(w http.ResponseWriter, r *http.Request, v *ratelimit.Verdict) {
		got = v
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	h := ratelimit.New(ratelimit.PerHour(1), byPeer, ratelimit.WithDeniedHandler(denied), ratelimit.WithName("login"), ratelimit.WithClock(newClock()))(ok)
	n, resp := 0, (*ratelimittest.Response)(nil)
	for n = 1; n <= 3; n++ {
		if resp = ratelimittest.Do(h, ratelimittest.NewRequest("POST", "/login", "")); resp.Code != 200 {
			break
		}
	}
	if n != 2 || resp.Code != 503 || got == nil || got.Rule() != "login" || got.Result().Allowed || got.Result().RetryAfter != time.Hour || !got.Denied() {
		t.Fatalf("denied handler: request %d, status %d, decision %+v", n, resp.Code, got)
	}
	if resp.Header.Get("Retry-After") != "3600" || resp.Header.Get("Content-Type") != "" {
		t.Fatalf("denied handler headers: %v", resp.Header)
	}
}

// TestDeniedHandlerMayWriteTheDefaultResponse: a denied handler that only
// observes the denial (logs it, counts it) and calls v.Write gets the
// response the limiter sends without a denied handler, fields and body,
// once: Write from inside the handler does not call the handler again.
func TestDeniedHandlerMayWriteTheDefaultResponse(t *testing.T) {
	for _, rule := range []ratelimit.Rule{
		{Name: "login", Limit: ratelimit.PerHour(1), Key: byPeer},
		{Name: "busy", Key: byPeer, Adaptive: &adaptive.Config{Min: 1, Max: 1, Initial: 1}},
	} {
		var answers [2]*httptest.ResponseRecorder
		for i, opts := range [][]ratelimit.Option{nil, {ratelimit.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, v *ratelimit.Verdict) {
			v.Write(w)
		})}} {
			l := ratelimit.NewRulesLimiter([]ratelimit.Rule{rule}, append(opts, ratelimit.WithClock(newClock()))...)
			hold := make(chan struct{})
			v := l.Check(httptest.NewRequest("GET", "/", nil)) // the first request, held
			if !v.Allowed() {
				t.Fatalf("%s: the first request was not admitted", rule.Name)
			}
			answers[i] = httptest.NewRecorder()
			l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hold })).ServeHTTP(answers[i], httptest.NewRequest("GET", "/", nil))
			close(hold)
			v.Done()
		}
		def, got := answers[0], answers[1]
		if got.Code != def.Code || got.Body.String() != def.Body.String() || !reflect.DeepEqual(got.Header(), def.Header()) {
			t.Errorf("%s: Write from the denied handler: %d %v %q\nwant the default: %d %v %q", rule.Name, got.Code, got.Header(), got.Body, def.Code, def.Header(), def.Body)
		}
	}
}

// failingStore fails every call, as an unreachable Redis would.
var (
	errDown      = errors.New("connection refused")
	failingStore = ratelimittest.FailingStore{Err: errDown}
)

func TestStoreErrors(t *testing.T) {
	h := ratelimit.New(ratelimit.PerSecond(1), byPeer, ratelimit.WithStore(failingStore))(ok)
	for i := 0; i < 3; i++ {
		resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
		if resp.Code != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("fail-open default: status %d, RateLimit %q", resp.Code, resp.Header.Get("RateLimit"))
		}
	}
	var seen error
	h = ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerSecond(1), Key: byPeer, OnStoreError: ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable}}}, ratelimit.WithStore(failingStore), ratelimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		seen = err
		http.Error(w, "limiter unavailable", http.StatusServiceUnavailable)
	}))(ok)
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	if resp.Code != 503 || !errors.Is(seen, errDown) || !strings.HasPrefix(seen.Error(), "ratelimit: ") {
		t.Fatalf("fail-closed handler: status %d, error %v", resp.Code, seen)
	}
}

func TestLegacyHeaders(t *testing.T) {
	clock := newClock()
	h := ratelimit.New(ratelimit.PerMinute(2), byPeer, ratelimit.WithClock(clock),
		ratelimit.WithHeaders(ratelimit.HeadersLegacy))(ok)
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	reset := fmt.Sprint(clock.Now().Add(30 * time.Second).Unix())
	if resp.Header.Get("X-RateLimit-Limit") != "2" || resp.Header.Get("X-RateLimit-Remaining") != "1" ||
		resp.Header.Get("X-RateLimit-Reset") != reset || resp.Header.Get("RateLimit") != "" {
		t.Fatalf("legacy headers: %v (want reset %s)", resp.Header, reset)
	}

	h = ratelimit.New(ratelimit.PerMinute(1), byPeer, ratelimit.WithClock(clock),
		ratelimit.WithHeaders(ratelimit.HeadersNone))(ok)
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	resp = ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	if resp.Code != 429 || resp.Header.Get("Retry-After") != "60" || resp.Header.Get("RateLimit") != "" || resp.Header.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("HeadersNone denial: %d %v", resp.Code, resp.Header)
	}
}

// recordingStore remembers the keys it was asked about.
type recordingStore struct {
	ratelimit.Store
	mu   sync.Mutex
	keys []string
}

func (s *recordingStore) Take(ctx context.Context, r stores.Request) (ratelimit.Result, error) {
	s.mu.Lock()
	s.keys = append(s.keys, r.Key)
	s.mu.Unlock()
	return s.Store.Take(ctx, r)
}

func TestLongKeysAreHashed(t *testing.T) {
	rec := &recordingStore{Store: ratelimit.NewMemoryStoreForTest()}
	byHeader := func(r *http.Request) (string, error) { return r.Header.Get("X-Key"), nil }
	h := ratelimit.New(ratelimit.PerHour(1), byHeader, ratelimit.WithStore(rec))(ok)
	a, b := strings.Repeat("a", 1<<20), strings.Repeat("a", 1<<20-1)+"b"
	for _, k := range []string{a, b} {
		if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "", "X-Key", k)); resp.Code != 200 {
			t.Fatalf("first request with a distinct 1 MB key: %d", resp.Code)
		}
	}
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "", "X-Key", a)); resp.Code != 429 {
		t.Fatalf("second request with the same 1 MB key: %d", resp.Code)
	}
	for _, k := range rec.keys {
		if len(k) > 256 {
			t.Fatalf("store received a %d-byte key", len(k))
		}
	}
}

func TestCostFunc(t *testing.T) {
	cost := func(r *http.Request) int {
		switch r.URL.Path {
		case "/search":
			return 5
		case "/huge":
			return 1000
		}
		return -3 // clamped to 1
	}
	h := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerHour(10), Key: byPeer, Cost: cost}}, ratelimit.WithClock(newClock()))(ok)
	remaining := func(path string) string {
		return ratelimittest.Do(h, ratelimittest.NewRequest("GET", path, "")).Header.Get("RateLimit")
	}
	if got := remaining("/search"); !strings.Contains(got, "r=5;") {
		t.Fatalf("after a search: %q", got)
	}
	if got := remaining("/neg"); !strings.Contains(got, "r=4;") {
		t.Fatalf("a negative cost must count as 1: %q", got)
	}
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/huge", "")); resp.Code != 429 {
		t.Fatalf("a cost above capacity must be clamped to the capacity (and denied here): %d", resp.Code)
	}
}

func TestConstructionPanics(t *testing.T) {
	cases := map[string]func(){
		"zero limit":       func() { ratelimit.New(ratelimit.Limit{}, byPeer) },
		"negative rate":    func() { ratelimit.New(ratelimit.PerSecond(-1), byPeer) },
		"rate above 1e9/s": func() { ratelimit.New(ratelimit.PerSecond(2e9), byPeer) },
		"nil key":          func() { ratelimit.New(ratelimit.PerSecond(1), nil) },
		"bad name":         func() { ratelimit.WithName(`a"b`) },
		"burst with window": func() {
			ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerSecond(1).WithBurst(5), Key: byPeer, Algorithm: ratelimit.FixedWindow}})
		},
		"relative carveout": func() { ratelimit.WithCarveOuts("healthz") },
		"nil store":         func() { ratelimit.WithStore(nil) },
		"nil memory store":  func() { ratelimit.WithStore((*memory.Store)(nil)) },
		"zero memory store": func() { ratelimit.New(ratelimit.PerSecond(1), byPeer, ratelimit.WithStore(&memory.Store{})) },
		"rule with a zero memory store": func() {
			ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerSecond(1), Key: byPeer, Settled: true, Store: &memory.Store{}}})
		},
		// Not when the rule's store first fails, in the middle of an outage.
		"nil fallback": func() {
			ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerSecond(1), Key: byPeer, OnStoreError: ratelimit.FailurePolicy{Fallback: (*memory.Store)(nil)}}})
		},
		"zero memory fallback": func() {
			ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerSecond(1), Key: byPeer, OnStoreError: ratelimit.FailurePolicy{Fallback: &memory.Store{}}}})
		},
		"nil next": func() { ratelimit.New(ratelimit.PerSecond(1), byPeer)(nil) },
		"error handler without a rule failing closed": func() {
			ratelimit.New(ratelimit.PerSecond(1), byPeer, ratelimit.WithErrorHandler(func(http.ResponseWriter, *http.Request, error) {}))
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatal("no panic")
				}
				if msg := fmt.Sprint(r); !strings.HasPrefix(msg, "ratelimit: ") {
					t.Fatalf("panic %q lacks the ratelimit: prefix", msg)
				}
			}()
			f()
		})
	}
}

func TestLimiterAllow(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(3), byPeer, ratelimit.WithName("login"), ratelimit.WithClock(newClock()))
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if res, err := l.Allow(ctx, "alice"); err != nil || !res.Allowed {
			t.Fatalf("attempt %d: %+v %v", i, res, err)
		}
	}
	if res, _ := l.Allow(ctx, "alice"); res.Allowed {
		t.Fatal("fourth attempt allowed")
	}
	if err := l.Return(ctx, "alice", 1); err != nil {
		t.Fatal(err)
	}
	if res, _ := l.Allow(ctx, "alice"); !res.Allowed {
		t.Fatal("attempt after a refund denied")
	}
	if res, _ := l.AllowN(ctx, "bob", 0); !res.Allowed || res.Remaining != 3 {
		t.Fatalf("AllowN(0) must only look: %+v", res)
	}
	if _, err := l.AllowN(ctx, "bob", -1); !errors.Is(err, ratelimit.ErrInvalidRequest) {
		t.Fatalf("AllowN(-1): %v", err)
	}
}

func TestNestedLimitersListBothPolicies(t *testing.T) {
	clock := newClock()
	inner := ratelimit.New(ratelimit.PerMinute(2), byPeer, ratelimit.WithName("login"), ratelimit.WithClock(clock))(ok)
	h := ratelimit.New(ratelimit.PerMinute(100), byPeer, ratelimit.WithName("per-ip"), ratelimit.WithClock(clock))(inner)
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("POST", "/login", ""))
	policies, err := ratelimittest.ParsePolicies(resp.Header)
	if err != nil || len(policies) != 2 || policies[0].Name != "per-ip" || policies[1].Name != "login" {
		t.Fatalf("policies %+v, %v", policies, err)
	}
	if got := resp.Header.Values("RateLimit"); len(got) != 2 || got[1] != `"login";r=1;t=30` {
		t.Fatalf("RateLimit lines %q", got)
	}
}

// TestAllocations holds the request path to its allocation budget: one
// allocation (the response fields) on the allow and the deny path, with an
// IPv4 client and the default headers. The budget is three.
func TestAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, tc := range []struct {
		name  string
		limit ratelimit.Limit
		code  int
	}{
		{"allow", ratelimit.Limit{Rate: 1e9, Period: time.Second}, 200},
		{"deny", ratelimit.PerHour(1), 429},
	} {
		h := ratelimit.New(tc.limit, ratelimit.ByIP())(next)
		req := ratelimittest.NewRequest("GET", "/api", "198.51.100.7:5555")
		w := ratelimittest.NewDiscardWriter()
		h.ServeHTTP(w, req)
		allocs := testing.AllocsPerRun(200, func() {
			w.Reset()
			h.ServeHTTP(w, req)
		})
		if w.Status() != tc.code || allocs > 1 {
			t.Errorf("%s path: status %d, %.1f allocs per request, want %d and at most 1", tc.name, w.Status(), allocs, tc.code)
		}
	}
}

func TestAllFieldsOnDenial(t *testing.T) {
	clock := newClock()
	h := ratelimit.New(ratelimit.PerMinute(1), byPeer, ratelimit.WithClock(clock),
		ratelimit.WithName("a-rather-long-policy-name-that-does-not-fit-the-small-buffer-012"),
		ratelimit.WithHeaders(ratelimit.HeadersIETF|ratelimit.HeadersLegacy))(ok)
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", ""))
	want := map[string]string{
		"RateLimit":             `"a-rather-long-policy-name-that-does-not-fit-the-small-buffer-012";r=0;t=60`,
		"X-RateLimit-Limit":     "1",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     fmt.Sprint(clock.Now().Add(time.Minute).Unix()),
		"Retry-After":           "60",
		"Cache-Control":         "no-store",
		"Content-Type":          "application/problem+json",
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}

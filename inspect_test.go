package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// noResetStore hides the Resetter of the store it wraps.
type noResetStore struct{ ratelimit.Store }

func TestPeekConsumesNothingAndResetRestoresCapacity(t *testing.T) {
	ctx := context.Background()
	clock := ratelimittest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := map[string]func() ratelimit.Option{
		"default": func() ratelimit.Option { return ratelimit.WithClock(clock) },
		"memory":  func() ratelimit.Option { return ratelimit.WithStore(memory.New(memory.WithClock(clock))) },
	}
	for sname, opt := range stores {
		for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.Concurrency, ratelimit.SlidingLog} {
			t.Run(sname+"/"+alg.String(), func(t *testing.T) {
				long := strings.Repeat("k", 300) // hashed by the middleware: Reset must map it the same way
				l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
					{Name: "api", Limit: ratelimit.PerMinute(3), Algorithm: alg, Key: ratelimit.ByHeader("X-Key")},
					{Name: "other", Limit: ratelimit.PerMinute(3), Algorithm: alg, Key: ratelimit.ByHeader("X-Key")},
				}, opt(), ratelimit.WithClock(clock))
				var held []func() // Concurrency slots stay held
				defer func() {
					for _, done := range held {
						done()
					}
				}()
				get := func() int {
					w := ratelimittest.NewDiscardWriter()
					done, admitted := l.Admit(w, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1", "X-Key", long))
					if !admitted {
						return w.Status()
					}
					held = append(held, done)
					return 200
				}
				for range 3 {
					if c := get(); c != 200 {
						t.Fatalf("status %d", c)
					}
				}
				for range 5 {
					res, err := l.Peek(ctx, "api", long)
					if err != nil || res.Allowed || res.Remaining != 0 {
						t.Fatalf("peek after 3 of 3: %+v, %v", res, err)
					}
				}
				if err := l.Reset(ctx, "api", long); err != nil {
					t.Fatal(err)
				}
				res, err := l.Peek(ctx, "api", long)
				if err != nil || !res.Allowed || res.Remaining != 3 {
					t.Fatalf("peek after reset: %+v, %v", res, err)
				}
				if res, _ := l.Peek(ctx, "other", long); res.Remaining != 0 {
					t.Fatalf("reset of one rule touched another: %+v", res)
				}
				if c := get(); c != 429 { // "other" still denies
					t.Fatalf("status %d, want 429 from the rule not reset", c)
				}
				if err := l.Reset(ctx, "other", long); err != nil {
					t.Fatal(err)
				}
				for i := range 3 {
					if c := get(); c != 200 {
						t.Fatalf("request %d after resetting both: %d", i, c)
					}
				}
				if c := get(); c != 429 {
					t.Fatalf("status %d after 3 more, want 429: peeks consumed or reset overshot", c)
				}
			})
		}
	}
}

func TestPeekAndResetErrors(t *testing.T) {
	ctx := context.Background()
	store := noResetStore{memory.New()}
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "plan", LimitFunc: func(*http.Request) (ratelimit.Limit, bool) { return ratelimit.PerSecond(1), true }, Key: ratelimit.Global()},
		{Name: "ip", Limit: ratelimit.PerSecond(1), Key: ratelimit.Global()},
	}, ratelimit.WithStore(store))
	if _, err := l.Peek(ctx, "nope", "k"); !errors.Is(err, ratelimit.ErrUnknownRule) {
		t.Errorf("peek unknown rule: %v", err)
	}
	if err := l.Reset(ctx, "nope", "k"); !errors.Is(err, ratelimit.ErrUnknownRule) {
		t.Errorf("reset unknown rule: %v", err)
	}
	if _, err := l.Peek(ctx, "plan", "k"); !errors.Is(err, ratelimit.ErrInvalidRequest) {
		t.Errorf("peek of a LimitFunc rule without Limit: %v", err)
	}
	if err := l.Reset(ctx, "ip", "k"); !errors.Is(err, ratelimit.ErrResetUnsupported) {
		t.Errorf("reset on a store without Reset: %v", err)
	}
}

// TestPeekUnderReadsAKeyUnderItsOwnLimit: a LimitFunc rule gives one
// tenant 5/min; after 3 of its requests PeekUnder with that limit reads 2
// left (Peek, against the rule's 2/min, reads none). Quotas and invalid
// limits are refused.
func TestPeekUnderReadsAKeyUnderItsOwnLimit(t *testing.T) {
	ctx := context.Background()
	clock := ratelimittest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	big := ratelimit.PerMinute(5)
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "plan", Limit: ratelimit.PerMinute(2), Key: ratelimit.ByHeader("X-Tenant"),
			LimitFunc: func(r *http.Request) (ratelimit.Limit, bool) {
				if r.Header.Get("X-Tenant") == "big" {
					return big, true
				}
				return ratelimit.PerMinute(2), true
			}},
		{Name: "daily", Quota: ratelimit.Daily(5, time.UTC), Key: ratelimit.Global()},
	}, ratelimit.WithClock(clock))
	h := l.Handler(ok)
	for range 3 {
		if c := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1", "X-Tenant", "big")).Code; c != 200 {
			t.Fatalf("status %d", c)
		}
	}
	if res, err := l.PeekUnder(ctx, "plan", "big", big); err != nil || !res.Allowed || res.Remaining != 2 || res.Limit != big {
		t.Fatalf("PeekUnder(big, 5/min) after 3: %+v, %v; want 2 left of 5/min", res, err)
	}
	if res, err := l.Peek(ctx, "plan", "big"); err != nil || res.Allowed {
		t.Fatalf("Peek(big) against the rule's 2/min after 3: %+v, %v; want not allowed", res, err)
	}
	if _, err := l.PeekUnder(ctx, "daily", "global", big); !errors.Is(err, ratelimit.ErrInvalidRequest) {
		t.Errorf("PeekUnder of a quota: %v, want ErrInvalidRequest", err)
	}
	if _, err := l.PeekUnder(ctx, "plan", "big", ratelimit.Limit{}); !errors.Is(err, ratelimit.ErrInvalidRequest) {
		t.Errorf("PeekUnder with a zero limit: %v, want ErrInvalidRequest", err)
	}
	if _, err := l.PeekUnder(ctx, "nope", "big", big); !errors.Is(err, ratelimit.ErrUnknownRule) {
		t.Errorf("PeekUnder of an unknown rule: %v, want ErrUnknownRule", err)
	}
}

func TestPeekOfQuotaReadsTheCurrentWindow(t *testing.T) {
	ctx := context.Background()
	clock := ratelimittest.NewClock(time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC))
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "daily", Quota: ratelimit.Daily(2, time.UTC), Key: ratelimit.Global()}}, ratelimit.WithClock(clock))
	h := l.Handler(ok)
	ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "10.0.0.1:1"))
	if res, err := l.Peek(ctx, "daily", "global"); err != nil || res.Remaining != 1 {
		t.Fatalf("peek: %+v %v", res, err)
	}
	clock.Advance(2 * time.Hour) // next day
	if res, err := l.Peek(ctx, "daily", "global"); err != nil || res.Remaining != 2 {
		t.Fatalf("peek next day: %+v %v", res, err)
	}
}

func TestAdminHandlerPeeksAndResets(t *testing.T) {
	clock := ratelimittest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "ip", Limit: ratelimit.PerMinute(2), Key: ratelimit.ByHeader("X-Key")}}, ratelimit.WithClock(clock))
	rl := ratelimit.NewReloadable(l)
	admin := ratelimit.NewAdminHandler(rl)
	for range 2 {
		ratelimittest.Do(rl.Handler(ok), ratelimittest.NewRequest("GET", "/", "10.0.0.1:1", "X-Key", "a b"))
	}
	do := func(method, target string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		admin.ServeHTTP(w, httptest.NewRequest(method, target, nil))
		return w
	}
	w := do("GET", "/?rule=ip&key=a+b")
	var body struct {
		Rule      string `json:"rule"`
		Allowed   bool   `json:"allowed"`
		Remaining int    `json:"remaining"`
		Rate      int    `json:"rate"`
	}
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || json.Unmarshal(w.Body.Bytes(), &body) != nil ||
		body.Rule != "ip" || body.Allowed || body.Remaining != 0 || body.Rate != 2 {
		t.Fatalf("peek: %d %s", w.Code, w.Body)
	}
	if w := do("POST", "/?rule=ip&key=a+b"); w.Code != 204 {
		t.Fatalf("reset: %d %s", w.Code, w.Body)
	}
	if w := do("GET", "/?rule=ip&key=a+b"); w.Code != 200 || !strings.Contains(w.Body.String(), `"remaining":2`) {
		t.Fatalf("peek after reset: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct {
		method, target string
		code           int
	}{
		{"GET", "/?rule=nope&key=x", 404},
		{"POST", "/?rule=nope&key=x", 404},
		{"GET", "/?key=x", 400},
		{"GET", "/?rule=ip", 400},
		{"DELETE", "/?rule=ip&key=x", 405},
	} {
		if w := do(c.method, c.target); w.Code != c.code || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %d %q, want %d problem", c.method, c.target, w.Code, w.Header().Get("Content-Type"), c.code)
		}
	}
}

// TestAdminHandlerRefusesCrossOriginReset: a page on another site that
// submits a form to the admin handler makes the administrator's browser
// POST with the administrator's cookie. The handler refuses it (403) as
// http.CrossOriginProtection does, and the key stays limited; a same-origin
// POST and one from a client that is not a browser still reset.
func TestAdminHandlerRefusesCrossOriginReset(t *testing.T) {
	clock := ratelimittest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "ip", Limit: ratelimit.PerMinute(1), Key: ratelimit.ByHeader("X-Key")}}, ratelimit.WithClock(clock))
	admin := ratelimit.NewAdminHandler(l)
	exhaust := func() {
		ratelimittest.Do(l.Handler(ok), ratelimittest.NewRequest("GET", "/", "10.0.0.1:1", "X-Key", "k"))
		if res, err := l.Peek(context.Background(), "ip", "k"); err != nil || res.Remaining != 0 {
			t.Fatalf("peek before reset: %+v %v", res, err)
		}
	}
	post := func(header ...string) *http.Request {
		r := httptest.NewRequest("POST", "https://admin.example/ratelimit?rule=ip&key=k", strings.NewReader("x=1"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Cookie", "session=admin")
		for i := 0; i < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return r
	}
	for _, c := range []struct {
		name string
		req  *http.Request
		code int
	}{
		{"cross-site form", post("Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"), http.StatusForbidden},
		{"same-site other origin", post("Sec-Fetch-Site", "same-site", "Origin", "https://blog.admin.example"), http.StatusForbidden},
		{"Origin only (older browser)", post("Origin", "https://evil.example"), http.StatusForbidden},
		{"same origin", post("Sec-Fetch-Site", "same-origin", "Origin", "https://admin.example"), http.StatusNoContent},
		{"not a browser", post(), http.StatusNoContent},
	} {
		exhaust()
		stdlib := http.StatusNoContent
		if http.NewCrossOriginProtection().Check(c.req) != nil {
			stdlib = http.StatusForbidden
		}
		w := httptest.NewRecorder()
		admin.ServeHTTP(w, c.req)
		if w.Code != c.code || stdlib != c.code {
			t.Errorf("%s: %d %s (CrossOriginProtection: %d), want %d", c.name, w.Code, w.Body, stdlib, c.code)
		}
		res, err := l.Peek(context.Background(), "ip", "k")
		if reset := err == nil && res.Remaining == 1; reset != (c.code == http.StatusNoContent) {
			t.Errorf("%s: after a %d the key has %+v %v", c.name, w.Code, res, err)
		}
	}
}

// TestPeekUnderRefusesABurstAWindowRuleCannotTake: PeekUnder documents an
// error wrapping ErrInvalidRequest for an invalid limit. A limit with a
// Burst other than its Rate is valid on its own (Limit.Validate) but not
// for a FixedWindow or SlidingWindow rule: PeekUnder passed it to the
// store, whose refusal wraps ErrInvalidLimit alone.
func TestPeekUnderRefusesABurstAWindowRuleCannotTake(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow} {
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
			{Name: "win", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Algorithm: alg},
		}, ratelimit.WithClock(newClock()))
		_, err := l.PeekUnder(context.Background(), "win", "k", ratelimit.Limit{Rate: 5, Burst: 10, Period: time.Minute})
		if !errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Errorf("%v: PeekUnder with Burst 10 over Rate 5: %v, want an error wrapping ErrInvalidRequest", alg, err)
		}
	}
}

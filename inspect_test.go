package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
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

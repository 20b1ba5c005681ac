package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestCostAboveCapacityIsNeverAdmitted: a request that costs more than the
// limit holds at once is denied even with the bucket full (it used to be
// clamped to the capacity and admitted), with a problem+json body that says
// so and no Retry-After, consumes nothing, and is reported as CostExceeded.
func TestCostAboveCapacityIsNeverAdmitted(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.Concurrency, ratelimit.SlidingLog} {
		t.Run(alg.String(), func(t *testing.T) {
			rec := &recorder{}
			cost := func(r *http.Request) int {
				if r.URL.Path == "/export" {
					return 11
				}
				return 1
			}
			h := ratelimit.NewRules([]ratelimit.Rule{{Name: "cost", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Algorithm: alg, Cost: cost}},
				ratelimit.WithObserver(rec), ratelimit.WithStore(memory.New()))(http.NotFoundHandler())
			resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/export", ""))
			if resp.Code != 429 || resp.Header.Get("Retry-After") != "" || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("cost 11 of 10: %d, Retry-After %q, Content-Type %q", resp.Code, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"))
			}
			var body struct {
				Type     string   `json:"type"`
				Detail   string   `json:"detail"`
				Violated []string `json:"violated-policies"`
			}
			if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
				t.Fatalf("body %q: %v", resp.Body, err)
			}
			if body.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || !strings.Contains(body.Detail, "costs 11") || !strings.Contains(body.Detail, "at most 10") || len(body.Violated) != 1 || body.Violated[0] != "cost" {
				t.Fatalf("body %+v", body)
			}
			if got := rec.outcomes(); got != "cost:cost_exceeded" {
				t.Fatalf("events %q, want cost:cost_exceeded", got)
			}
			// Nothing was consumed: the full 10 are still there.
			for i := 0; i < 10; i++ {
				if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")); resp.Code != 404 {
					t.Fatalf("request %d of 10 after the denied export: %d", i+1, resp.Code)
				}
			}
		})
	}
}

// TestCostAboveCapacityShadowAndMultiRule: a shadow rule only reports it;
// with several rules the request is denied before any store is asked.
func TestCostAboveCapacityShadowAndMultiRule(t *testing.T) {
	rec := &recorder{}
	big := func(*http.Request) int { return 5 }
	h := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "wide", Limit: ratelimit.PerMinute(100), Key: ratelimit.Global(), Cost: big},
		{Name: "narrow", Limit: ratelimit.PerMinute(3), Key: ratelimit.Global(), Cost: big},
		{Name: "shadow", Limit: ratelimit.PerMinute(2), Key: ratelimit.Global(), Cost: big, Shadow: true},
	}, ratelimit.WithObserver(rec))(http.NotFoundHandler())
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")); resp.Code != 429 || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("cost 5 under a rule of 3: %d, Retry-After %q", resp.Code, resp.Header.Get("Retry-After"))
	}
	if got := rec.outcomes(); got != "narrow:cost_exceeded" {
		t.Fatalf("events %q", got)
	}

	rec = &recorder{}
	shadow := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "shadow", Limit: ratelimit.PerMinute(2), Key: ratelimit.Global(), Cost: big, Shadow: true},
	}, ratelimit.WithObserver(rec))(http.NotFoundHandler())
	if resp := ratelimittest.Do(shadow, ratelimittest.NewRequest("GET", "/", "")); resp.Code != 404 {
		t.Fatalf("a shadow rule denied: %d", resp.Code)
	}
	if got := rec.outcomes(); got != "shadow:cost_exceeded" {
		t.Fatalf("shadow events %q", got)
	}
}

// TestAllowNAboveCapacity: AllowN with n above the capacity is an error
// wrapping ErrInvalidRequest and consumes nothing.
func TestAllowNAboveCapacity(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(10), ratelimit.Global())
	if _, err := l.AllowN(context.Background(), "k", 11); !errors.Is(err, ratelimit.ErrInvalidRequest) {
		t.Fatalf("AllowN(11) of 10: %v, want ErrInvalidRequest", err)
	}
	res, err := l.AllowN(context.Background(), "k", 10)
	if err != nil || !res.Allowed {
		t.Fatalf("AllowN(10) after the rejected 11: %+v, %v", res, err)
	}
}

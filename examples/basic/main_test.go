package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

const client = "203.0.113.9:5000"

// TestExample checks what the example's printed curl commands promise.
func TestExample(t *testing.T) {
	h := newHandler(ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/hello", client))
	if resp.Code != 200 || resp.Body != "hello\n" || resp.Header.Get("RateLimit") != `"ip-100-per-1m-burst-20";r=19;t=1` {
		t.Fatalf("GET /hello: %d %q %v", resp.Code, resp.Body, resp.Header)
	}
	login := func() *http.Request { return ratelimittest.NewRequest("POST", "/login", "203.0.113.10:5000") }
	resp = ratelimittest.ExpectLimitedAt(t, h, 6, login)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("6th login: %v", resp.Header)
	}
	for i := 0; i < 30; i++ {
		if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/healthz", client)); resp.Code != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("health check %d: %d %v", i, resp.Code, resp.Header)
		}
	}
}

// TestLoginsDeniedByTheLoginLimitCostNothingElse: the two limits are rules
// of one limiter, so they stack all-or-nothing. Had the example nested two
// limiters, the 45 denied attempts would have spent the client's burst of
// 20 on the outer one, and GET /hello would be a 429. Six units taken at
// one instant leave r=14, and t=1: the next unit is back in 0.6 s (t is
// when one more unit is available, not when the burst is full again).
func TestLoginsDeniedByTheLoginLimitCostNothingElse(t *testing.T) {
	h := newHandler(ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	login := ratelimittest.NewRequest("POST", "/login", client)
	for i := 1; i <= 50; i++ {
		resp := ratelimittest.Do(h, login.Clone(login.Context()))
		if want := i > 5; resp.Limited() != want {
			t.Fatalf("login attempt %d: status %d", i, resp.Code)
		}
	}
	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/hello", client))
	if resp.Code != 200 || resp.Header.Get("RateLimit") != `"ip-100-per-1m-burst-20";r=14;t=1` {
		t.Fatalf("GET /hello after 5 admitted and 45 denied logins: %d %v", resp.Code, resp.Header)
	}
}

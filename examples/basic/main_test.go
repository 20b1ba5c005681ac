package main

import (
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestExample checks what the example's printed curl commands promise.
func TestExample(t *testing.T) {
	h := newHandler()
	client := func() *http.Request { return ratelimittest.NewRequest("POST", "/login", "203.0.113.9:5000") }

	resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/api/items", ""))
	if resp.Code != 200 || resp.Header.Get("RateLimit") != `"per-ip";r=9;t=1` || resp.Header.Get("RateLimit-Policy") != `"per-ip";q=10;w=10` {
		t.Fatalf("GET /api/items: %d %v", resp.Code, resp.Header)
	}
	resp = ratelimittest.ExpectLimitedAt(t, h, 6, client)
	if resp.Header.Get("Retry-After") == "" || len(resp.Header.Values("RateLimit")) != 2 {
		t.Fatalf("6th login: %v", resp.Header)
	}
	for i := 0; i < 20; i++ {
		if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/healthz", "")); resp.Code != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("health check %d: %d %v", i, resp.Code, resp.Header)
		}
	}
}

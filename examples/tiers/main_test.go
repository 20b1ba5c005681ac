package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestExample checks what the example's printed curl commands promise
// (except the slow export, which holds a slot for three seconds).
func TestExample(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHandler(reg, reg)
	withKey := func(key string) func() *http.Request {
		return func() *http.Request { return ratelimittest.NewRequest("GET", "/api/hello", "", "X-API-Key", key) }
	}

	resp := ratelimittest.Do(h, withKey("standard-key-2")())
	want := `"plan-rate";q=50;w=5, "plan-quota";q=50000;w=86400, "plan-concurrency";q=10;qu="concurrent-requests", "per-ip";q=40;w=2`
	if resp.Code != 200 || resp.Header.Get("RateLimit-Policy") != want {
		t.Fatalf("standard tenant: %d, policy %q", resp.Code, resp.Header.Get("RateLimit-Policy"))
	}
	ratelimittest.ExpectLimitedAt(t, h, 11, withKey("free-key-1")) // bursts of 10
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/api/hello", "")); resp.Code != 401 {
		t.Fatalf("no API key: %d, want 401", resp.Code)
	}
	metrics := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/metrics", ""))
	if metrics.Code != 200 || !strings.Contains(metrics.Body, `ratelimit_decisions_total{key_kind="tenant",outcome="denied",rule="plan-rate"} 1`) {
		t.Fatalf("/metrics: %d\n%s", metrics.Code, metrics.Body)
	}
}

// Package apptest checks what the chi, gin and echo example apps promise in
// the curl commands they print, so that the examples keep working.
package apptest

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit/ratelimittest"
)

// Check runs the printed commands against h: three logins then a 429, five
// requests to /api/users/{id} then a 429 (one bucket for every id), another
// route with its own bucket, and /healthz never limited.
func Check(t *testing.T, h http.Handler) {
	t.Helper()
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "")); resp.Code != 200 || resp.Header.Get("RateLimit") == "" {
		t.Fatalf("GET /: %d, RateLimit %q", resp.Code, resp.Header.Get("RateLimit"))
	}
	ratelimittest.ExpectLimitedAt(t, h, 4, func() *http.Request { return ratelimittest.NewRequest("POST", "/login", "") })
	id := 0
	ratelimittest.ExpectLimitedAt(t, h, 6, func() *http.Request {
		id++
		return ratelimittest.NewRequest("GET", fmt.Sprintf("/api/users/%d", id), "")
	})
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/api/items/1", "")); resp.Code != 200 {
		t.Fatalf("another route shares the users bucket: %d", resp.Code)
	}
	for i := 0; i < 40; i++ {
		if resp := ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/healthz", "")); resp.Code != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("health check %d: %d, RateLimit %q", i, resp.Code, resp.Header.Get("RateLimit"))
		}
	}
}

package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/ratelimit"
)

// A server of one seat, in the preset's levels: while a request holds the
// seat, the next one waits up to MaxWait and is refused with 503, while a
// health check passes at once.
func ExampleNewFair() {
	cfg := ratelimit.FairPreset(1, ratelimit.ByHeader("X-Tenant"))
	cfg.MaxWait = time.Millisecond
	cfg.Classify = func(r *http.Request) string {
		if r.URL.Path == "/healthz" {
			return ratelimit.LevelExempt
		}
		return ratelimit.LevelInteractive
	}
	fair := ratelimit.NewFair(cfg)

	done, ok := fair.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/api", nil))
	fmt.Println("first:", ok)

	rec := httptest.NewRecorder()
	_, ok = fair.Admit(rec, httptest.NewRequest("GET", "/api", nil))
	fmt.Println("second:", ok, rec.Code, "Retry-After", rec.Header().Get("Retry-After"))

	_, ok = fair.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	fmt.Println("health check:", ok)
	done()
	// Output:
	// first: true
	// second: false 503 Retry-After 1
	// health check: true
}

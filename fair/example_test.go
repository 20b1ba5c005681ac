package fair_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/fair"
)

// A server of one seat, in the preset's levels: while a request holds the
// seat, the next one waits up to MaxWait and is refused with 503, while a
// health check passes at once.
func ExampleNew() {
	cfg := fair.Preset(1, ratelimit.ByHeader("X-Tenant"))
	cfg.MaxWait = time.Millisecond
	cfg.Classify = func(r *http.Request) string {
		if r.URL.Path == "/healthz" {
			return fair.LevelExempt
		}
		return fair.LevelInteractive
	}
	sched := fair.New(cfg)

	done, ok := sched.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/api", nil))
	fmt.Println("first:", ok)

	rec := httptest.NewRecorder()
	_, ok = sched.Admit(rec, httptest.NewRequest("GET", "/api", nil))
	fmt.Println("second:", ok, rec.Code, "Retry-After", rec.Header().Get("Retry-After"))

	_, ok = sched.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	fmt.Println("health check:", ok)
	done()
	// Output:
	// first: true
	// second: false 503 Retry-After 1
	// health check: true
}

// A framework adapter takes a seat with Acquire and gives it back with
// Release; a second Release, here after the seat has gone to the next
// request, frees nothing.
func ExampleScheduler_Acquire() {
	sched := fair.New(fair.Preset(1, ratelimit.ByHeader("X-Tenant")))
	r := httptest.NewRequest("GET", "/api", nil)

	first, ok := sched.Acquire(httptest.NewRecorder(), r)
	fmt.Println("first:", ok)
	first.Release()

	second, ok := sched.Acquire(httptest.NewRecorder(), r)
	fmt.Println("second:", ok)
	first.Release() // again: does nothing
	fmt.Println("in use:", sched.Stats().InUse)
	second.Release()
	fmt.Println("in use:", sched.Stats().InUse)
	// Output:
	// first: true
	// second: true
	// in use: 1
	// in use: 0
}

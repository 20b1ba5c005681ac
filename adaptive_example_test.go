package ratelimit_test

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/ratelimit"
)

// An adaptive cap on the requests in flight of the whole process, in front
// of a per-IP rate. Requests with X-Priority: batch are shed first.
func ExampleAdaptive() {
	mw := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.Global(), Adaptive: &ratelimit.Adaptive{
			Max:      500,
			Critical: func(r *http.Request) bool { return r.Header.Get("X-Priority") != "batch" },
		}},
		{Name: "ip", Limit: ratelimit.PerMinute(600), Key: ratelimit.ByIP()},
	})
	_ = mw(http.NotFoundHandler())
}

// Outside net/http: acquire a slot, do the work, release it with what
// happened.
func ExampleAdaptiveLimiter() {
	l := ratelimit.NewAdaptiveLimiter(ratelimit.Adaptive{Min: 2, Max: 2, Initial: 2})
	a, _ := l.Acquire(true)
	b, _ := l.Acquire(true)
	_, ok := l.Acquire(true)
	fmt.Println("third admitted:", ok)
	a.Release(ratelimit.SampleSuccess)
	b.Release(ratelimit.SampleDrop)
	fmt.Println("in flight:", l.State().InFlight)
	// Output:
	// third admitted: false
	// in flight: 0
}

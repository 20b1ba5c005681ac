package adaptive_test

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
)

// An adaptive cap on the requests in flight of the whole process, in front
// of a per-IP rate. Requests with X-Priority: batch are shed first.
func ExampleConfig() {
	mw := ratelimit.NewRules([]ratelimit.Rule{
		{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{
			Max:      500,
			Critical: func(r *http.Request) bool { return r.Header.Get("X-Priority") != "batch" },
		}},
		{Name: "ip", Limit: ratelimit.PerMinute(600), Key: ratelimit.ByIP()},
	})
	_ = mw(http.NotFoundHandler())
}

// Outside net/http: acquire a slot, do the work, release it with what
// happened.
func ExampleLimiter() {
	l := adaptive.New(adaptive.Config{Min: 2, Max: 2, Initial: 2})
	a, _ := l.Acquire(true)
	b, _ := l.Acquire(true)
	_, ok := l.Acquire(true)
	fmt.Println("third admitted:", ok)
	a.Release(adaptive.SampleSuccess)
	b.Release(adaptive.SampleDrop)
	fmt.Println("in flight:", l.State().InFlight)
	// Output:
	// third admitted: false
	// in flight: 0
}

package ratelimittest

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
)

func logged(key string, l ratelimit.Limit, cost int) stores.Request {
	return withAlg(gcra(key, l, cost), ratelimit.SlidingLog)
}

// logCases check the sliding log's exact answers: an event counts for
// exactly one Period after it was admitted, Remaining is Rate less the
// events in the trailing Period, RetryAfter is when enough of the oldest
// have left, and ResetAfter when the newest has.
var logCases = []struct {
	name string
	run  func(t *testing.T, st *storeTester)
}{
	{"SlidingLog/each-event-leaves-one-period-after-it-came", func(t *testing.T, st *storeTester) {
		req := logged("k", ratelimit.PerMinute(3), 1)
		st.take(req, allowed(2, time.Minute))
		st.clock.Advance(10 * time.Second)
		st.take(req, allowed(1, time.Minute))
		st.clock.Advance(10 * time.Second)
		st.take(req, allowed(0, time.Minute))
		st.clock.Advance(10 * time.Second) // +30s: the first leaves at +60s
		st.take(req, denied(0, 30*time.Second, 50*time.Second))
		st.clock.Advance(30*time.Second - ms)
		st.take(req, denied(0, ms, 20*time.Second+ms))
		st.clock.Advance(ms) // +60s: the first has left, the second not
		st.take(req, allowed(0, time.Minute))
		st.clock.Advance(ms)
		st.take(req, denied(0, 10*time.Second-ms, time.Minute-ms)) // the newest is at +60s
		st.clock.Advance(2 * time.Minute)
		st.take(req, allowed(2, time.Minute))
	}},
	// A cost of n fits when n more events fit in the trailing Period; one
	// that does not fit consumes nothing and waits for the n oldest to
	// leave that make room.
	{"SlidingLog/cost", func(t *testing.T, st *storeTester) {
		req := logged("k", ratelimit.PerMinute(10), 4)
		st.take(req, allowed(6, time.Minute))
		st.clock.Advance(10 * time.Second)
		st.take(req, allowed(2, time.Minute))
		st.clock.Advance(10 * time.Second)
		st.take(req, denied(2, 40*time.Second, 50*time.Second)) // 2 of the 4 at +0s must leave
		req.Cost = 0
		st.take(req, allowed(2, 50*time.Second))
		req.Cost = 2
		st.take(req, allowed(0, time.Minute))
		st.clock.Advance(40 * time.Second) // +60s: the 4 of +0s leave
		req.Cost = 4
		st.take(req, allowed(0, time.Minute))
	}},
	// Return with a take's Slot gives back exactly that take's events: the
	// log then frees up when the other takes' events leave. A Slot whose
	// events have left gives back nothing.
	{"SlidingLog/return-gives-back-that-take", func(t *testing.T, st *storeTester) {
		req := logged("k", ratelimit.PerMinute(5), 2)
		first := st.take(req, allowed(3, time.Minute))
		st.clock.Advance(10 * time.Second)
		req.Cost = 3
		st.take(req, allowed(0, time.Minute))
		req.Cost = 2
		st.release(req, first)
		st.take(req, allowed(0, time.Minute))
		req.Cost = 1
		// Left: 3 at +10s and 2 at +10s; the first take's events are gone,
		// so nothing leaves before +70s.
		st.take(req, denied(0, time.Minute, time.Minute))
		st.clock.Advance(time.Minute)
		st.release(req, first) // long gone: nothing to give back
		st.take(req, allowed(4, time.Minute))
	}},
}

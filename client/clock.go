package ratelimitclient

import (
	"math"
	"net/http"
	"sync/atomic"
	"time"
)

// serverClock estimates how far a server's clock is ahead of the client's
// (behind when negative), so that the absolute times it sends (a Unix time
// in X-RateLimit-Reset, an HTTP-date in Retry-After) are read on its own
// clock.
//
// A Date field is the whole second the server's clock had reached when it
// answered, so each response bounds the offset from below by its Date minus
// the time it arrived, and the largest bound is kept. Reading each Date on
// its own puts the server's clock up to a second behind, which makes every
// reset up to a second late: at a window of one second, half the quota.
// Responses that arrive on either side of the server's second ticks bring
// the bound to within their spacing of the true offset. A Date more than a
// second behind the bound (the server's clock was set back, or a server with
// another clock answered) restarts it.
type serverClock struct {
	ahead atomic.Int64               // nanoseconds; noOffset until a Date is read
	date  atomic.Pointer[parsedDate] // the Date value parsed last
}

const noOffset = math.MinInt64

// parsedDate caches a Date value: it changes once a second, and parsing it
// costs more than the rest of the fields together.
type parsedDate struct {
	value string
	t     time.Time
}

func (c *serverClock) init() { c.ahead.Store(noOffset) }

// read returns the server's clock at now, when a response with fields h
// arrived, updating the estimate from its Date field.
func (c *serverClock) read(h http.Header, now time.Time) time.Time {
	v := h[hdrDate]
	if len(v) != 1 {
		if a := c.ahead.Load(); a != noOffset {
			return now.Add(time.Duration(a))
		}
		return now
	}
	pd := c.date.Load()
	if pd == nil || pd.value != v[0] {
		t, err := http.ParseTime(v[0])
		if err != nil {
			return now
		}
		pd = &parsedDate{value: v[0], t: t}
		c.date.Store(pd)
	}
	bound := int64(pd.t.Sub(now))
	for {
		old := c.ahead.Load()
		a := old
		if old == noOffset || bound > old || bound+int64(time.Second) < old {
			a = bound
		}
		if a == old || c.ahead.CompareAndSwap(old, a) {
			return now.Add(time.Duration(a))
		}
	}
}

package ratelimitclient

import (
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
// answered: with the time the response arrived, it bounds the offset from
// below (the Date) and, but for the response's time in flight, from above
// (the Date plus a second). The tightest bounds are kept. Reading each Date
// on its own puts the server's clock up to a second behind, which makes
// every reset up to a second late: at a window of one second, half the
// quota. Responses that arrive on either side of the server's second ticks
// bring the bounds to within their spacing. Bounds that contradict each
// other (the server's clock was set, or a server with another clock
// answered) restart from the latest response.
type serverClock struct {
	bounds atomic.Pointer[offset]
	date   atomic.Pointer[parsedDate] // the Date value parsed last
}

// maxSkew is the farthest a server's clock is taken to be from the
// client's; a Date further off is not used.
const maxSkew = 400 * 24 * time.Hour

// offset bounds how far the server's clock is ahead: lo <= offset < hi,
// but for the time responses spend in flight.
type offset struct{ lo, hi time.Duration }

// parsedDate caches a Date value: it changes once a second, and parsing it
// costs more than the rest of the fields together.
type parsedDate struct {
	value string
	t     time.Time
}

// serverTime is the server's clock when a response arrived: no earlier
// than lo and no later than hi; date is the response's Date, zero when it
// has none.
type serverTime struct{ lo, hi, date time.Time }

// read returns the server's clock at now, when a response with fields h
// arrived, updating the estimate from the response's Date field.
func (c *serverClock) read(h http.Header, now time.Time) serverTime {
	o := c.bounds.Load()
	v := h[hdrDate]
	if len(v) != 1 {
		if o == nil {
			return serverTime{lo: now, hi: now}
		}
		return serverTime{lo: now.Add(o.lo), hi: now.Add(o.hi)}
	}
	pd := c.date.Load()
	if pd == nil || pd.value != v[0] {
		t, err := http.ParseTime(v[0])
		if err != nil {
			return serverTime{lo: now, hi: now}
		}
		pd = &parsedDate{value: v[0], t: t}
		c.date.Store(pd)
	}
	d := pd.t.Sub(now)
	if d > maxSkew || d < -maxSkew {
		return serverTime{lo: now, hi: now} // not a clock to read times on
	}
	n := offset{d, d + time.Second}
	for {
		if o != nil && o.lo <= n.hi && n.lo <= o.hi { // consistent: intersect
			n = offset{max(o.lo, n.lo), min(o.hi, n.hi)}
			if n.lo-o.lo < time.Millisecond && o.hi-n.hi < time.Millisecond {
				break // not worth an allocation
			}
		}
		if c.bounds.CompareAndSwap(o, &n) {
			break
		}
		o = c.bounds.Load()
		n = offset{d, d + time.Second}
	}
	return serverTime{lo: now.Add(n.lo), hi: now.Add(n.hi), date: pd.t}
}

package ratelimitclient

import (
	"math"
	"net/http"
	"sync/atomic"
	"time"
)

// mono is a reading of a Transport's clock: nanoseconds of the monotonic
// clock since a second before the Transport was first used, so that every
// reading is positive and zero can stand for none. The Transport keeps its
// times as mono: comparing and adding them are integer operations, where
// each on a time.Time (a wall and a monotonic reading, and a location)
// costs several times more, on every request. Wall times (a server's Date,
// a context's deadline, a rate.Limiter's) are related to it through the
// epoch it counts from (see serverClock.wall).
type mono int64

// never is a time no reading reaches.
const never = mono(math.MaxInt64)

// add returns m plus d, saturating: a server's delays are capped, but at
// the largest caps a sum could overflow.
func (m mono) add(d time.Duration) mono {
	s := m + mono(d)
	switch {
	case d > 0 && s < m:
		return never
	case d < 0 && s > m:
		return math.MinInt64
	}
	return s
}

// sub returns the time from o to m.
func (m mono) sub(o mono) time.Duration { return time.Duration(m - o) }

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
	epoch  time.Time // the wall time of the Transport's clock's zero (see mono)
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

// wall returns the wall time of the reading m.
func (c *serverClock) wall(m mono) time.Time { return c.epoch.Add(time.Duration(m)) }

// read returns the server's clock at now, when a response with fields h
// arrived, updating the estimate from the response's Date field.
func (c *serverClock) read(h http.Header, now mono) serverTime { return c.readWall(h, c.wall(now)) }

// readWall is read at the wall time now.
func (c *serverClock) readWall(h http.Header, now time.Time) serverTime {
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

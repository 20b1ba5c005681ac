package ratelimit

import (
	"sync/atomic"
	"time"
)

// fastClock reads the system clock as Unix nanoseconds with one monotonic
// clock read: the wall time of an anchor plus the monotonic time elapsed
// since it. The anchor is renewed once it is a second old (or the
// monotonic reading goes back, which it cannot), so the result follows the
// wall clock, its steps included, within a second, and drifts from it by no
// more than the wall clock's slew over that second (at most 0.5 ms under
// NTP). time.Now reads two clocks, which on a virtual machine's clock source
// costs as much as the rest of a check.
//
// The zero value is ready to use, and safe for concurrent use.
type fastClock struct {
	anchor atomic.Pointer[clockAnchor]
}

type clockAnchor struct {
	at   time.Time // with its monotonic reading
	wall int64     // at.UnixNano()
	_    [32]byte  // a whole cache line: see TestHotStateFillsWholeCacheLines
}

const anchorLife = time.Second

var systemFastClock fastClock

func (c *fastClock) unixNano() int64 {
	if a := c.anchor.Load(); a != nil {
		if d := time.Since(a.at); d >= 0 && d < anchorLife {
			return a.wall + int64(d)
		}
	}
	now := time.Now()
	c.anchor.Store(&clockAnchor{at: now, wall: now.UnixNano()})
	return now.UnixNano()
}

package ratelimittest

import (
	"sync"
	"time"
)

// Clock is a fake ratelimit.Clock that moves only when told to.
//
// Its methods are safe for concurrent use. Create one with NewClock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock stopped at t. A zero t means 2026-01-01T00:00:00Z,
// a time on the boundary of every common window (second, minute, hour, day).
func NewClock(t time.Time) *Clock {
	if t.IsZero() {
		t = Epoch()
	}
	return &Clock{now: t}
}

// Epoch returns the default start of a Clock, 2026-01-01 00:00:00 UTC: the
// start of a year, a month, a day and every shorter window (not of an ISO
// week: it is a Thursday). A function, so that no test can move it for
// every other.
func Epoch() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time. A negative d
// moves it back, as a wall clock can be stepped back.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

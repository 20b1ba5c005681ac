package ratelimit

import (
	"testing"
	"time"
)

// TestFastClockFollowsTheWallClock: each reading lies between two wall
// clock readings taken around it, give or take the slew the wall clock may
// have had since the anchor (generously, 50 ms), including across anchor
// renewals.
func TestFastClockFollowsTheWallClock(t *testing.T) {
	var c fastClock
	const slack = int64(50 * time.Millisecond)
	for i := range 10_000 {
		before := time.Now().UnixNano()
		got := c.unixNano()
		after := time.Now().UnixNano()
		if got < before-slack || got > after+slack {
			t.Fatalf("reading %d: %d outside [%d, %d]", i, got, before, after)
		}
		if i%1000 == 0 { // force a renewal
			a := c.anchor.Load()
			c.anchor.Store(&clockAnchor{at: a.at.Add(-anchorLife), wall: a.wall - int64(anchorLife)})
		}
	}
}

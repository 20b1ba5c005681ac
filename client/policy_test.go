package ratelimitclient

import (
	"testing"
	"time"
)

// TestGradualQuotaIsPacedThroughItsReset: a server whose quota came back a
// unit at a time before the reset it announced (a sliding log: the reset is
// when its oldest request leaves the window, rounded up to a whole second)
// is not waited for when its quota reads spent: a unit comes back every
// interval, and the client goes on at a little under the average rate.
// Against a server that restores its quota whole, the client waits.
func TestGradualQuotaIsPacedThroughItsReset(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	for _, gradual := range []bool{false, true} {
		var p policy
		q := quota{remaining: 5, reset: time.Second, limit: 10, window: time.Second}
		p.apply(q, 1, 1, t0, time.Hour)
		if gradual {
			q.remaining = 6 // a unit back 100 ms later, long before the reset
		} else {
			q.remaining = 4
		}
		p.apply(q, 2, 2, t0.Add(100*time.Millisecond), time.Hour)
		q.remaining = 0
		now := t0.Add(200 * time.Millisecond)
		p.apply(q, 3, 3, now, time.Hour)
		slot, _, ok := p.take(now)
		switch {
		case !ok:
			t.Fatalf("gradual %v: send refused", gradual)
		case gradual && slot.Sub(now) > 110*time.Millisecond:
			t.Errorf("gradual quota: send waits %v; want about the average spacing, 102 ms", slot.Sub(now))
		case !gradual && slot.Before(t0.Add(time.Second)):
			t.Errorf("quota restored whole: send after %v; want after the reset, at 1 s", slot.Sub(t0))
		}
	}
}

package ratelimit_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// gateClock is a Clock whose next reading, once armed, waits until it is
// released: a request held in the middle of its decision.
type gateClock struct {
	*ratelimittest.Clock
	armed             atomic.Bool
	entered, released chan struct{}
}

func (c *gateClock) Now() time.Time {
	if c.armed.CompareAndSwap(true, false) {
		close(c.entered)
		<-c.released
	}
	return c.Clock.Now()
}

// TestPacedRequestThatFitsTakesNoWaitingPlace: a request that fits now is
// served without a waiting place, even while it is being decided, so that
// the rule's one place (MaxWaiting 1) stays free for a request that must
// wait: that one reserves its turn (its context, already ended, then gives
// it back with a 503) instead of being rejected for want of a place.
func TestPacedRequestThatFitsTakesNoWaitingPlace(t *testing.T) {
	clock := &gateClock{Clock: ratelimittest.NewClock(time.Time{}), entered: make(chan struct{}), released: make(chan struct{})}
	limit := ratelimit.Limit{Rate: 1, Period: time.Hour}
	h, _ := pacedRule(ratelimit.Rule{Name: "paced", Limit: limit, Pace: ratelimit.Pace{MaxDelay: 2 * time.Hour, MaxWaiting: 1}},
		ratelimit.WithClock(clock))
	if code, _, _ := serve(h, keyed("waiter")); code != 200 { // its bucket is now empty
		t.Fatalf("first request of the waiter's key: %d, want 200", code)
	}
	clock.armed.Store(true)
	fits := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, keyed("fresh")) // fits now, held while it reads the clock
		fits <- rec.Code
	}()
	<-clock.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code, _, _ := serve(h, keyed("waiter").WithContext(ctx)); code != 503 {
		t.Errorf("a request that must wait, while one that fits is decided: %d, want 503 (a place, a turn, given back)", code)
	}
	close(clock.released)
	if code := <-fits; code != 200 {
		t.Errorf("the request that fits: %d, want 200", code)
	}
}

package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// A probe that never returns keeps the breaker half-open forever, even after
// the store recovers.
func TestRegressionBreakerHungProbe(t *testing.T) {
	clock := ratelimittest.NewClock(time.Time{})
	var mode atomic.Int32 // 0 fail, 1 hang, 2 healthy
	block := make(chan struct{})
	entered := make(chan struct{}) // closed when the probe reaches the store
	st := storeFn(func(ctx context.Context) error {
		switch mode.Load() {
		case 0:
			return errRDown
		case 1:
			close(entered)
			<-block
			return errRDown
		}
		return nil
	})
	br := breaker.New(st, breaker.Config{Failures: 1, Clock: clock})
	req := ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1), Cost: 1}
	br.Take(context.Background(), req)
	clock.Advance(2 * time.Second)
	mode.Store(1)
	go br.Take(context.Background(), req) // the probe hangs (no deadline)
	<-entered
	mode.Store(2) // the store is healthy again
	clock.Advance(time.Hour)
	_, err := br.Take(context.Background(), req)
	t.Logf("an hour later, healthy store: state=%v err=%v", br.State(), err)
	if err != nil {
		t.Error("breaker stuck half-open behind a hung probe")
	}
	close(block)
}

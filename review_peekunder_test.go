package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

// TestPeekUnderRefusesABurstAWindowRuleCannotTake: PeekUnder documents an
// error wrapping ErrInvalidRequest for an invalid limit. A limit with a
// Burst other than its Rate is valid on its own (Limit.Validate) but not
// for a FixedWindow or SlidingWindow rule: PeekUnder passed it to the
// store, whose refusal wraps ErrInvalidLimit alone.
func TestPeekUnderRefusesABurstAWindowRuleCannotTake(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow} {
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
			{Name: "win", Limit: ratelimit.PerMinute(10), Key: ratelimit.Global(), Algorithm: alg},
		}, ratelimit.WithClock(newClock()))
		_, err := l.PeekUnder(context.Background(), "win", "k", ratelimit.Limit{Rate: 5, Burst: 10, Period: time.Minute})
		if !errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Errorf("%v: PeekUnder with Burst 10 over Rate 5: %v, want an error wrapping ErrInvalidRequest", alg, err)
		}
	}
}
